import CTSS2
import Foundation

/// A TPM object in the only form that leaves the TPM: its public area and its private area, the latter encrypted
/// and integrity-protected under the storage root key's seed, so it loads only into the TPM that made it.
package struct TPMObject: Sendable, Hashable {
    /// The marshalled `TPM2B_PUBLIC`.
    package var publicArea: Data
    /// The marshalled `TPM2B_PRIVATE`.
    package var privateArea: Data

    package init(publicArea: Data, privateArea: Data) {
        self.publicArea = publicArea
        self.privateArea = privateArea
    }

    /// `publicArea || privateArea`, each a TPM2B (its own two-byte size first), so the two parse apart again.
    package var serialized: Data { publicArea + privateArea }

    /// Parses `serialized`'s output. - Throws: `TPMError` when the bytes are not one public and one private area.
    package init(serialized data: Data) throws {
        var publicValue = TPM2B_PUBLIC()
        var privateValue = TPM2B_PRIVATE()
        let bytes = [UInt8](data)
        var offset = 0
        var rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(bytes, bytes.count, &offset, &publicValue)
        let publicEnd = offset
        if rc == 0 { rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(bytes, bytes.count, &offset, &privateValue) }
        guard rc == 0, offset == bytes.count else {
            throw TPMError(code: rc == 0 ? TPMError.badSize : rc, operation: "read a TPM object")
        }
        publicArea = Data(bytes[0..<publicEnd])
        privateArea = Data(bytes[publicEnd...])
    }

    /// The public key of a P-256 key object (`04 || X || Y`), or nil when the object is not one. Authentic only
    /// once the TPM has loaded the object (the private area's integrity covers the public area).
    package var p256PublicKey: Data? {
        var publicValue = TPM2B_PUBLIC()
        guard (try? unmarshal(publicArea, into: &publicValue, Tss2_MU_TPM2B_PUBLIC_Unmarshal)) != nil,
            publicValue.publicArea.type == TPM2_ALG_ECC,
            publicValue.publicArea.parameters.eccDetail.curveID == TPM2_ECC_NIST_P256
        else { return nil }
        return TPMConnection.x963(publicValue.publicArea.unique.ecc)
    }

    init(public publicValue: UnsafePointer<TPM2B_PUBLIC>, private privateValue: UnsafePointer<TPM2B_PRIVATE>) throws {
        publicArea = try marshal(publicValue, Tss2_MU_TPM2B_PUBLIC_Marshal)
        privateArea = try marshal(privateValue, Tss2_MU_TPM2B_PRIVATE_Marshal)
    }

    func unmarshalled() throws -> (TPM2B_PUBLIC, TPM2B_PRIVATE) {
        var publicValue = TPM2B_PUBLIC()
        var privateValue = TPM2B_PRIVATE()
        try unmarshal(publicArea, into: &publicValue, Tss2_MU_TPM2B_PUBLIC_Unmarshal)
        try unmarshal(privateArea, into: &privateValue, Tss2_MU_TPM2B_PRIVATE_Unmarshal)
        return (publicValue, privateValue)
    }
}

typealias Marshal<Value> = (UnsafePointer<Value>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) ->
    TSS2_RC
typealias Unmarshal<Value> = (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<Value>?) ->
    TSS2_RC

/// One TSS2 structure in its wire form.
func marshal<Value>(_ value: UnsafePointer<Value>, _ function: Marshal<Value>) throws -> Data {
    var buffer = [UInt8](repeating: 0, count: MemoryLayout<Value>.size + 16)
    var offset = 0
    let rc = function(value, &buffer, buffer.count, &offset)
    guard rc == 0 else { throw TPMError(code: rc, operation: "encode a TPM structure") }
    return Data(buffer[0..<offset])
}

/// Parses exactly one TSS2 structure from `data`.
func unmarshal<Value>(_ data: Data, into value: inout Value, _ function: Unmarshal<Value>) throws {
    let bytes = [UInt8](data)
    var offset = 0
    let rc = function(bytes, bytes.count, &offset, &value)
    guard rc == 0, offset == bytes.count else {
        throw TPMError(code: rc == 0 ? TPMError.badSize : rc, operation: "read a TPM structure")
    }
}

/// Fills a TPM2B (a two-byte size, then its buffer) with `bytes`.
func setTPM2B<Value>(_ value: inout Value, _ bytes: UnsafeRawBufferPointer) throws {
    try withUnsafeMutableBytes(of: &value) { raw in
        guard bytes.count <= raw.count - 2 else {
            throw TPMError(code: TPMError.badSize, operation: "fit \(bytes.count) bytes into a TPM buffer")
        }
        raw.storeBytes(of: UInt16(bytes.count), as: UInt16.self)
        if let base = bytes.baseAddress { (raw.baseAddress! + 2).copyMemory(from: base, byteCount: bytes.count) }
    }
}

/// The bytes a TPM2B holds.
func bytesOfTPM2B<Value>(_ value: UnsafePointer<Value>) -> UnsafeRawBufferPointer {
    let raw = UnsafeRawPointer(value)
    let count = min(Int(raw.load(as: UInt16.self)), MemoryLayout<Value>.size - 2)
    return UnsafeRawBufferPointer(start: raw + 2, count: count)
}
