import CTSS2
import CTSS2Templates
import Foundation
import SecureCrypto
import Synchronization

/// One conversation with a TPM 2.0 through tpm2-tss's ESAPI: the storage root key, one salted session, and the
/// objects loaded for the operations asked of it. Closing it (or dropping it) flushes every object it loaded, so a
/// TPM without a resource manager (swtpm, `/dev/tpm0`) is left as it was found.
///
/// Every command that carries a secret (a sealed value, an authorization, a shared point) runs in an HMAC session
/// with parameter encryption both ways (AES-128-CFB), so the secret is not in clear on the bus to the TPM: salted
/// with the storage root key where no authorization value of the object keys it (`salted()`, `keyed()`).
///
/// Not thread-safe; one connection serves one operation at a time (see `TPM.withConnection`).
package final class TPMConnection {
    private var tcti: OpaquePointer?
    /// The ESAPI context (nil once closed).
    private(set) var context: OpaquePointer?
    private let configuration: String
    /// Transient objects and sessions this connection loaded, flushed when it closes.
    private var loaded: [ESYS_TR] = []
    private var storageKey: ESYS_TR?
    private var session: ESYS_TR?
    private var keySession: ESYS_TR?

    /// Connects through `configuration`, a TCTI string as tpm2-tools takes it (`device:/dev/tpmrm0`,
    /// `swtpm:path=/run/swtpm/sock`, `swtpm:host=127.0.0.1,port=2321`).
    ///
    /// - Throws: `TPMError` when there is no TPM there.
    package init(tcti configuration: String) throws {
        Self.silenceLibraryLog
        var tcti: OpaquePointer?
        var rc = Tss2_TctiLdr_Initialize(configuration, &tcti)
        guard rc == 0 else { throw TPMError(code: rc, operation: "reach a TPM through \(configuration)") }
        var context: OpaquePointer?
        rc = Esys_Initialize(&context, tcti, nil)
        guard rc == 0 else {
            Tss2_TctiLdr_Finalize(&tcti)
            throw TPMError(code: rc, operation: "start a TPM session through \(configuration)")
        }
        self.tcti = tcti
        self.context = context
        self.configuration = configuration
    }

    deinit { close() }

    /// Flushes every object this connection loaded and disconnects. Idempotent.
    package func close() {
        guard context != nil else { return }
        for handle in loaded.reversed() { _ = Esys_FlushContext(context, handle) }
        loaded = []
        Esys_Finalize(&context)
        Tss2_TctiLdr_Finalize(&tcti)
    }

    /// Disconnects without flushing, as a killed process would (tests of the next holder's clean-up).
    package func abandon() {
        loaded = []
        close()
    }

    /// tpm2-tss logs its errors to stderr unless told otherwise; ours carry the same codes, so its log is off
    /// unless `TSS2_LOG` asks for it.
    private static let silenceLibraryLog: Void = { setenv("TSS2_LOG", "all+NONE", 0) }()

    // MARK: Sealed data

    /// Seals `secret` (at most 128 bytes) into a new data object under the storage root key; it opens only in this
    /// TPM and only with `authorization`.
    ///
    /// - Parameter dictionaryAttackProtected: whether a wrong authorization counts towards the TPM's
    ///   dictionary-attack lockout (for an authorization derived from something a person types); otherwise the
    ///   object is `noDA` (for a random authorization, which nobody guesses).
    package func seal(
        _ secret: SecureBytes, authorization: SecureBytes, dictionaryAttackProtected: Bool = false
    ) throws -> TPMObject {
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { secureZero(of: &sensitive) }
        try authorization.withUnsafeBytes { try setTPM2B(&sensitive.sensitive.userAuth, $0) }
        try secret.withUnsafeBytes { try setTPM2B(&sensitive.sensitive.data, $0) }
        var template = TPM2B_PUBLIC()
        la_tpm_sealed_template(&template, dictionaryAttackProtected ? 1 : 0)
        return try create(sensitive: &sensitive, template: &template, operation: "seal a key in the TPM").object
    }

    /// Opens a sealed data object made by `seal`.
    ///
    /// - Throws: `TPMError` (`isForeignObject` when it was sealed by another TPM or its bytes were changed,
    ///   `isAuthorizationFailure` for a wrong authorization).
    package func unseal(_ object: TPMObject, authorization: SecureBytes) throws -> SecureBytes {
        let item = try load(object, authorization: authorization)
        defer { flush(item) }
        var out: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        let rc = Esys_Unseal(context, item, try salted(), ESYS_TR_NONE, ESYS_TR_NONE, &out)
        guard rc == 0, let out else { throw TPMError(code: rc, operation: TPMError.unsealing) }
        defer {
            secureZero(UnsafeMutableRawBufferPointer(start: out, count: MemoryLayout<TPM2B_SENSITIVE_DATA>.size))
            Esys_Free(out)
        }
        return SecureBytes(bytesOfTPM2B(out))
    }

    // MARK: P-256 keys

    /// Makes a P-256 key inside the TPM under the storage root key, usable with `authorization`.
    ///
    /// - Returns: the key object and its public key (`04 || X || Y`).
    package func createP256Key(authorization: SecureBytes) throws -> (object: TPMObject, publicKey: Data) {
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { secureZero(of: &sensitive) }
        try authorization.withUnsafeBytes { try setTPM2B(&sensitive.sensitive.userAuth, $0) }
        var template = TPM2B_PUBLIC()
        la_tpm_p256_template(&template)
        let (object, publicArea) = try create(
            sensitive: &sensitive, template: &template, operation: "make a P-256 key in the TPM")
        return (object, Self.x963(publicArea.publicArea.unique.ecc))
    }

    /// Loads `object` for use with `authorization`; the handle is flushed by `flush` or when the connection closes.
    package func load(_ object: TPMObject, authorization: SecureBytes) throws -> TPMHandle {
        var (publicValue, privateValue) = try object.unmarshalled()
        var handle: ESYS_TR = ESYS_TR_NONE
        let rc = Esys_Load(
            context, try primary(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &privateValue, &publicValue, &handle)
        guard rc == 0 else { throw TPMError(code: rc, operation: "load a key into the TPM") }
        loaded.append(handle)
        var auth = TPM2B_AUTH()
        defer { secureZero(of: &auth) }
        try authorization.withUnsafeBytes { try setTPM2B(&auth, $0) }
        let set = Esys_TR_SetAuth(context, handle, &auth)
        guard set == 0 else { throw TPMError(code: set, operation: "set a key's authorization") }
        return handle
    }

    /// Flushes `handle` (an object or session) when the connection closes, unless flushed before.
    func track(_ handle: TPMHandle) {
        loaded.append(handle)
    }

    /// Flushes a loaded object now.
    package func flush(_ handle: TPMHandle) {
        guard let index = loaded.lastIndex(of: handle) else { return }
        loaded.remove(at: index)
        _ = Esys_FlushContext(context, handle)
    }

    /// ECDSA over a 32-byte value with a loaded P-256 key (`TPM2_Sign`, scheme ECDSA-SHA256, no hash ticket).
    ///
    /// ECDSA reads the digest as an integer of at most the curve's 256 bits, so a shorter digest left-padded with
    /// zeros and a longer one cut to its first 32 bytes give the signature the digest itself would: callers pass
    /// SHA-1, SHA-224, SHA-384 and SHA-512 digests that way.
    ///
    /// - Returns: `r` and `s`, 32 bytes each.
    package func sign(_ value: Data, with key: TPMHandle) throws -> (r: Data, s: Data) {
        precondition(value.count == 32, "TPMConnection.sign takes a 32-byte value")
        var digest = TPM2B_DIGEST()
        try value.withUnsafeBytes { try setTPM2B(&digest, $0) }
        var scheme = la_tpm_ecdsa_sha256()
        var ticket = la_tpm_null_ticket()
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        let rc = Esys_Sign(context, key, try keyed(), ESYS_TR_NONE, ESYS_TR_NONE, &digest, &scheme, &ticket, &signature)
        guard rc == 0, let signature else { throw TPMError(code: rc, operation: "sign with a TPM key") }
        defer { Esys_Free(signature) }
        var ecdsa = signature.pointee.signature.ecdsa
        return (Self.padded(&ecdsa.signatureR), Self.padded(&ecdsa.signatureS))
    }

    /// The X coordinate of `d · point` for a loaded P-256 key's scalar `d` (`TPM2_ECDH_ZGen`): the ECDH shared
    /// secret. `point` is `04 || X || Y`.
    package func sharedSecret(with key: TPMHandle, point: Data) throws -> SecureBytes {
        guard point.count == 65, point.first == 4 else {
            throw TPMError(code: TPMError.badSize, operation: "use a public key that is not an uncompressed point")
        }
        var inPoint = TPM2B_ECC_POINT()
        try point[point.startIndex + 1..<point.startIndex + 33].withUnsafeBytes { try setTPM2B(&inPoint.point.x, $0) }
        try point[point.startIndex + 33..<point.startIndex + 65].withUnsafeBytes { try setTPM2B(&inPoint.point.y, $0) }
        inPoint.size = UInt16(MemoryLayout<TPMS_ECC_POINT>.size)
        var out: UnsafeMutablePointer<TPM2B_ECC_POINT>?
        let rc = Esys_ECDH_ZGen(context, key, try keyed(), ESYS_TR_NONE, ESYS_TR_NONE, &inPoint, &out)
        guard rc == 0, let out else { throw TPMError(code: rc, operation: "derive a shared secret with a TPM key") }
        defer {
            secureZero(UnsafeMutableRawBufferPointer(start: out, count: MemoryLayout<TPM2B_ECC_POINT>.size))
            Esys_Free(out)
        }
        return withUnsafePointer(to: &out.pointee.point.x) { x in
            let bytes = bytesOfTPM2B(x)
            return SecureBytes(count: 32) { target in
                target.baseAddress!.advanced(by: 32 - bytes.count).copyMemory(
                    from: bytes.baseAddress!, byteCount: bytes.count)
            }
        }
    }

    // MARK: The TPM itself

    /// Who made the TPM and which firmware it runs (`TPM2_GetCapability`, fixed properties).
    package func information() throws -> TPMInformation {
        TPMInformation(properties: try properties(from: TPMInformation.manufacturerProperty, count: 8))
    }

    /// The state of the TPM's dictionary-attack protection (`TPM2_GetCapability`, variable properties).
    package func dictionaryAttackState() throws -> TPMDictionaryAttackState {
        TPMDictionaryAttackState(properties: try properties(from: TPMDictionaryAttackState.counterProperty, count: 4))
    }

    /// `count` TPM properties from `first` on, by number.
    private func properties(from first: UInt32, count: UInt32) throws -> [UInt32: UInt32] {
        var more: TPMI_YES_NO = 0
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        let rc = Esys_GetCapability(
            context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES, first, count, &more, &data)
        guard rc == 0, let data else { throw TPMError(code: rc, operation: "read the TPM's properties") }
        defer { Esys_Free(data) }
        var values: [UInt32: UInt32] = [:]
        let list = data.pointee.data.tpmProperties
        withUnsafeBytes(of: list.tpmProperty) { raw in
            let properties = raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self)
            for property in properties.prefix(Int(list.count)) { values[property.property] = property.value }
        }
        return values
    }

    /// Flushes every transient object and loaded session in the TPM: on a TPM without resource manager, while
    /// holding its lock, whatever is loaded was left by a holder that died mid-operation.
    func flushLeftovers() throws {
        var sys: OpaquePointer?
        let got = Esys_GetSysContext(context, &sys)
        guard got == 0, let sys else { throw TPMError(code: got, operation: "reach the TPM's system API") }
        for first: UInt32 in [0x8000_0000, 0x0200_0000, 0x0300_0000] {
            var more: TPMI_YES_NO = 0
            var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
            let rc = Esys_GetCapability(
                context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_HANDLES, first, 64, &more, &data)
            guard rc == 0, let data else { throw TPMError(code: rc, operation: "list the TPM's loaded objects") }
            defer { Esys_Free(data) }
            let list = data.pointee.data.handles
            let handles = withUnsafeBytes(of: list.handle) {
                Array($0.bindMemory(to: TPM2_HANDLE.self).prefix(Int(list.count)))
            }
            for handle in handles where handle & 0xFF00_0000 == first & 0xFF00_0000 {
                _ = Tss2_Sys_FlushContext(sys, handle)
            }
        }
    }

    // MARK: Storage root key and session

    /// The storage root key: the primary key the TCG's ECC P-256 storage template makes in the owner hierarchy
    /// (the same key every time, so nothing needs to be kept in the TPM's NV memory).
    ///
    /// Making it costs the TPM a key derivation (13 ms on swtpm, more on hardware), so the first connection of a
    /// process saves its context (`TPM2_ContextSave`: encrypted and integrity-protected by the TPM) and later ones
    /// load that instead; a context the TPM no longer takes (it was reset, or another TPM answers at the TCTI) is
    /// dropped and the key made again.
    private func primary() throws -> TPMHandle {
        if let storageKey { return storageKey }
        if let saved = Self.savedStorageKeys.withLock({ $0[configuration] }) {
            var value = TPMS_CONTEXT()
            var handle: ESYS_TR = ESYS_TR_NONE
            if (try? unmarshal(saved, into: &value, Tss2_MU_TPMS_CONTEXT_Unmarshal)) != nil,
                Esys_ContextLoad(context, &value, &handle) == 0
            {
                loaded.append(handle)
                storageKey = handle
                return handle
            }
            Self.savedStorageKeys.withLock { $0[configuration] = nil }
        }
        var template = TPM2B_PUBLIC()
        la_tpm_srk_template(&template)
        let (handle, _) = try createPrimary(
            in: ESYS_TR_RH_OWNER, template: &template, operation: "make the TPM's storage root key")
        storageKey = handle
        // Saving an object's context leaves it loaded.
        var saved: UnsafeMutablePointer<TPMS_CONTEXT>?
        if Esys_ContextSave(context, handle, &saved) == 0, let saved {
            defer { Esys_Free(saved) }
            if let bytes = try? marshal(saved, Tss2_MU_TPMS_CONTEXT_Marshal) {
                Self.savedStorageKeys.withLock { $0[configuration] = bytes }
            }
        }
        return handle
    }

    /// Makes the primary key `template` describes in `hierarchy` (empty authorization), loaded for this connection.
    func createPrimary(
        in hierarchy: ESYS_TR, template: inout TPM2B_PUBLIC, operation: String
    ) throws -> (TPMHandle, TPM2B_PUBLIC) {
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var handle: ESYS_TR = ESYS_TR_NONE
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        var creation = CreationRecord()
        defer {
            Esys_Free(outPublic)
            creation.free()
        }
        let rc = Esys_CreatePrimary(
            context, hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template,
            &creation.outsideInfo, &creation.pcrs, &handle, &outPublic, &creation.data, &creation.hash,
            &creation.ticket)
        guard rc == 0, let outPublic else { throw TPMError(code: rc, operation: operation) }
        loaded.append(handle)
        return (handle, outPublic.pointee)
    }

    /// Saved contexts of the storage root key, by TCTI (see `primary()`).
    private static let savedStorageKeys = Mutex<[String: Data]>([:])

    /// The HMAC session salted with the storage root key, encrypting the first parameter both ways: for commands
    /// whose secrets are not protected by an authorization value of their own (a new object's sensitive data and
    /// authorization, the unsealed device key, whose authorization is empty).
    private func salted() throws -> TPMHandle {
        if let session { return session }
        let handle = try startSession(salt: try primary())
        session = handle
        return handle
    }

    /// An unsalted HMAC session for using a key: the TPM derives its parameter-encryption key from the key's own
    /// authorization value (256 bits from the store's keys), so the shared point of `TPM2_ECDH_ZGen` is as hidden
    /// on the bus as in a salted session, without the salt's ECDH in the TPM on every use.
    func keyed() throws -> TPMHandle {
        if let keySession { return keySession }
        let handle = try startSession(salt: ESYS_TR_NONE)
        keySession = handle
        return handle
    }

    private func startSession(salt: ESYS_TR) throws -> TPMHandle {
        var symmetric = la_tpm_session_symmetric()
        var handle: ESYS_TR = ESYS_TR_NONE
        let rc = Esys_StartAuthSession(
            context, salt, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nil, TPM2_SE_HMAC, &symmetric,
            TPM2_ALG_SHA256, &handle)
        guard rc == 0 else { throw TPMError(code: rc, operation: "start a TPM session") }
        loaded.append(handle)
        let attributes = TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT)
        let set = Esys_TRSess_SetAttributes(context, handle, attributes, 0xFF)
        guard set == 0 else { throw TPMError(code: set, operation: "set up the TPM session") }
        return handle
    }

    private func create(
        sensitive: inout TPM2B_SENSITIVE_CREATE, template: inout TPM2B_PUBLIC, operation: String
    ) throws -> (object: TPMObject, publicArea: TPM2B_PUBLIC) {
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        var creation = CreationRecord()
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
            creation.free()
        }
        let rc = Esys_Create(
            context, try primary(), try salted(), ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template,
            &creation.outsideInfo, &creation.pcrs, &outPrivate, &outPublic, &creation.data, &creation.hash,
            &creation.ticket)
        guard rc == 0, let outPrivate, let outPublic else { throw TPMError(code: rc, operation: operation) }
        return (try TPMObject(public: outPublic, private: outPrivate), outPublic.pointee)
    }

    static func x963(_ point: TPMS_ECC_POINT) -> Data {
        var point = point
        return Data([4]) + padded(&point.x) + padded(&point.y)
    }

    /// A TPM2B_ECC_PARAMETER as 32 big-endian bytes (the TPM may leave out leading zeros).
    static func padded(_ parameter: UnsafePointer<TPM2B_ECC_PARAMETER>) -> Data {
        let bytes = bytesOfTPM2B(parameter)
        return Data(repeating: 0, count: max(0, 32 - bytes.count)) + Data(bytes.suffix(32))
    }
}

/// What making an object takes and gives besides the object: no outside information, no PCRs, and the creation
/// data, hash and ticket, which nothing here uses (freed by `free()`).
private struct CreationRecord {
    var outsideInfo = TPM2B_DATA()
    var pcrs = TPML_PCR_SELECTION()
    var data: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
    var hash: UnsafeMutablePointer<TPM2B_DIGEST>?
    var ticket: UnsafeMutablePointer<TPMT_TK_CREATION>?

    func free() {
        Esys_Free(data)
        Esys_Free(hash)
        Esys_Free(ticket)
    }
}

/// The TPM's maker and firmware, as `TPM2_GetCapability` reports them.
package struct TPMInformation: Sendable, Equatable {
    /// The manufacturer's four-character ID ("IBM", "INTC", "IFX", "STM", "NTC", "MSFT").
    package var manufacturer: String
    /// The vendor string (up to 16 characters; "SW" for swtpm).
    package var vendor: String
    /// The firmware version as the TPM gives it: four 16-bit parts.
    package var firmware: String

    /// TPM2_PT_MANUFACTURER; the vendor strings follow it (+1…+4), then the firmware version (+6, +7).
    static let manufacturerProperty: UInt32 = 0x105

    init(properties: [UInt32: UInt32]) {
        func text(_ values: [UInt32?]) -> String {
            var bytes: [UInt8] = []
            for value in values.compactMap({ $0 }) {
                bytes += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) }
            }
            return String(decoding: bytes.filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self)
                .split(separator: " ").joined(separator: " ")
        }
        manufacturer = text([properties[Self.manufacturerProperty]])
        vendor = text((1...4).map { properties[Self.manufacturerProperty + $0] })
        let first = properties[Self.manufacturerProperty + 6] ?? 0
        let second = properties[Self.manufacturerProperty + 7] ?? 0
        firmware = [first >> 16, first & 0xFFFF, second >> 16, second & 0xFFFF].map(String.init).joined(separator: ".")
    }
}

/// The TPM's dictionary-attack protection: how many wrong authorizations it has counted, how many it allows, and
/// how fast it forgets them. Objects without `noDA` count; the TPM refuses them all (`TPM_RC_LOCKOUT`) once the
/// counter reaches the maximum, until a recovery interval passes.
package struct TPMDictionaryAttackState: Sendable, Equatable {
    /// Wrong authorizations counted now (TPM2_PT_LOCKOUT_COUNTER).
    package var failures: UInt32
    /// The count at which the TPM locks out (TPM2_PT_MAX_AUTH_FAIL).
    package var maximumFailures: UInt32
    /// Seconds after which one counted failure is forgotten (TPM2_PT_LOCKOUT_INTERVAL).
    package var recoverySeconds: UInt32

    /// Whether the TPM refuses dictionary-attack-protected objects now.
    package var isLockedOut: Bool { failures >= maximumFailures }

    /// TPM2_PT_LOCKOUT_COUNTER; the maximum, the interval and the lockout recovery follow it.
    static let counterProperty: UInt32 = 0x20E

    init(properties: [UInt32: UInt32]) {
        failures = properties[Self.counterProperty] ?? 0
        maximumFailures = properties[Self.counterProperty + 1] ?? 0
        recoverySeconds = properties[Self.counterProperty + 2] ?? 0
    }
}

/// Zeroes a value's memory (a structure that held a secret).
func secureZero<Value>(of value: inout Value) {
    withUnsafeMutableBytes(of: &value) { secureZero($0) }
}

/// An object loaded into the TPM by a connection (an ESAPI handle), valid until the connection flushes it.
package typealias TPMHandle = ESYS_TR
