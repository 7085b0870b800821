import Foundation
import SecureCrypto

/// A `TPMT_PUBLIC` as the TPM marshals it: the fields a verifier checks. Parsed here without tpm2-tss, so a server
/// verifying attestations needs no TPM library.
struct TPMPublicArea {
    /// `TPM2_ALG_RSA` or `TPM2_ALG_ECC`.
    var type: UInt16
    var nameAlgorithm: UInt16
    var attributes: UInt32
    var authPolicy: Data
    /// The symmetric algorithm of a storage or endorsement key (`TPM2_ALG_NULL` for a signing key), its key bits
    /// and mode.
    var symmetric: (algorithm: UInt16, keyBits: UInt16, mode: UInt16)
    /// The signing scheme and its hash (`TPM2_ALG_NULL`, 0 when the key takes one per use).
    var scheme: (scheme: UInt16, hash: UInt16)
    /// RSA: key bits; ECC: the curve.
    var keyBitsOrCurve: UInt16
    /// RSA: the public exponent (0 means 65537).
    var exponent: UInt32
    /// RSA: the modulus; ECC: `X`, then `Y` (each 32 bytes on P-256).
    var unique: [Data]
    /// The marshalled bytes this was parsed from.
    var bytes: Data

    static let rsa: UInt16 = 0x0001
    static let ecc: UInt16 = 0x0023
    static let sha256: UInt16 = 0x000B
    static let null: UInt16 = 0x0010
    static let aes: UInt16 = 0x0006
    static let cfb: UInt16 = 0x0043
    static let ecdsa: UInt16 = 0x0018
    static let ecdaa: UInt16 = 0x001A
    static let nistP256: UInt16 = 0x0003

    static let fixedTPM: UInt32 = 0x0000_0002
    static let fixedParent: UInt32 = 0x0000_0010
    static let sensitiveDataOrigin: UInt32 = 0x0000_0020
    static let userWithAuth: UInt32 = 0x0000_0040
    static let adminWithPolicy: UInt32 = 0x0000_0080
    static let restricted: UInt32 = 0x0001_0000
    static let decrypt: UInt32 = 0x0002_0000
    static let sign: UInt32 = 0x0004_0000

    /// Parses exactly one RSA or ECC `TPMT_PUBLIC`.
    ///
    /// - Throws: `TPMAttestationError` for any other type, a truncated structure or bytes after it.
    init(_ bytes: Data) throws {
        var reader = TPMReader(bytes, what: "a TPM public area")
        type = try reader.uint16()
        nameAlgorithm = try reader.uint16()
        attributes = try reader.uint32()
        authPolicy = try reader.sized()
        guard type == Self.rsa || type == Self.ecc else {
            throw TPMAttestationError("a TPM public area of type 0x\(String(type, radix: 16)) is not an RSA or ECC key")
        }
        let symmetricAlgorithm = try reader.uint16()
        symmetric =
            symmetricAlgorithm == Self.null
            ? (Self.null, 0, 0) : (symmetricAlgorithm, try reader.uint16(), try reader.uint16())
        let schemeAlgorithm = try reader.uint16()
        if schemeAlgorithm == Self.null {
            scheme = (Self.null, 0)
        } else {
            scheme = (schemeAlgorithm, try reader.uint16())
            if schemeAlgorithm == Self.ecdaa { _ = try reader.uint16() }  // its count
        }
        keyBitsOrCurve = try reader.uint16()
        if type == Self.rsa {
            exponent = try reader.uint32()
            unique = [try reader.sized()]
        } else {
            exponent = 0
            let kdf = try reader.uint16()
            if kdf != Self.null { _ = try reader.uint16() }
            unique = [try reader.sized(), try reader.sized()]
        }
        try reader.finish()
        self.bytes = bytes
    }

    /// The object's name: the name algorithm, then the SHA-256 of the public area.
    ///
    /// - Throws: `TPMAttestationError` for a name algorithm other than SHA-256.
    func name() throws -> Data {
        guard nameAlgorithm == Self.sha256 else { throw TPMAttestationError("the key's name algorithm is not SHA-256") }
        return Data([0x00, 0x0B]) + SHA256.hash(bytes)
    }

    func has(_ required: UInt32) -> Bool { attributes & required == required }

    /// The P-256 public key (`04 || X || Y`), when this is a P-256 key.
    var p256PublicKey: Data? {
        guard type == Self.ecc, keyBitsOrCurve == Self.nistP256, unique.count == 2,
            unique.allSatisfy({ $0.count <= 32 })
        else { return nil }
        func padded(_ coordinate: Data) -> Data { Data(count: 32 - coordinate.count) + coordinate }
        return Data([4]) + padded(unique[0]) + padded(unique[1])
    }
}

/// A `TPMS_ATTEST` of type certify: what `TPM2_Certify` signs.
struct TPMCertifyStatement {
    /// `TPM_GENERATED_VALUE` when the TPM made the structure itself; a restricted key signs nothing else.
    var magic: UInt32
    var type: UInt16
    /// The verifier's nonce, as the TPM received it.
    var extraData: Data
    /// The certified object's name.
    var certifiedName: Data

    static let generatedValue: UInt32 = 0xFF54_4347
    static let certifyType: UInt16 = 0x8017

    /// Parses a marshalled certify `TPMS_ATTEST`.
    ///
    /// - Throws: `TPMAttestationError` for another attestation type, a truncated structure or bytes after it.
    init(_ bytes: Data) throws {
        var reader = TPMReader(bytes, what: "a TPM attestation statement")
        magic = try reader.uint32()
        type = try reader.uint16()
        _ = try reader.sized()  // qualifiedSigner
        extraData = try reader.sized()
        _ = try reader.bytes(8 + 4 + 4 + 1)  // clockInfo: clock, resetCount, restartCount, safe
        _ = try reader.bytes(8)  // firmwareVersion
        guard type == Self.certifyType else {
            throw TPMAttestationError("the statement is of type 0x\(String(type, radix: 16)), not a certification")
        }
        certifiedName = try reader.sized()
        _ = try reader.sized()  // qualifiedName
        try reader.finish()
    }
}

/// Reads TPM wire structures: big-endian integers and TPM2B buffers (a two-byte size, then the bytes).
struct TPMReader {
    private let bytes: [UInt8]
    private var offset = 0
    private let what: String

    init(_ data: Data, what: String) {
        bytes = [UInt8](data)
        self.what = what
    }

    mutating func bytes(_ count: Int) throws -> Data {
        guard count <= bytes.count - offset else { throw TPMAttestationError("\(what) is truncated") }
        defer { offset += count }
        return Data(bytes[offset..<offset + count])
    }

    mutating func uint16() throws -> UInt16 {
        try bytes(2).reduce(0) { $0 << 8 | UInt16($1) }
    }

    mutating func uint32() throws -> UInt32 {
        try bytes(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func sized() throws -> Data {
        try bytes(Int(try uint16()))
    }

    func finish() throws {
        guard offset == bytes.count else {
            throw TPMAttestationError("\(what) has \(bytes.count - offset) bytes too many")
        }
    }
}
