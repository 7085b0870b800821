import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient

/// One FIDO2 credential (a passkey, or a server-side credential): what the authenticator keeps about it besides its
/// key. The key is an `LAPersistedRight`'s (``FIDOCredentials``); this record is a keychain item of its own, readable
/// without the user (it names the relying party and the user, holds no secret), so a sign-in can find the
/// credentials of a site before it asks for the finger, and its counter can move after each signature.
public struct FIDOCredential: Codable, Sendable, Equatable {
    /// The credential's ID: 16 random bytes.
    public var id: [UInt8]
    /// The relying party's ID (a domain: `github.com`).
    public var relyingParty: String
    /// The relying party's name, when it gave one.
    public var relyingPartyName: String?
    /// The user handle the relying party chose (at most 64 bytes).
    public var userID: [UInt8]
    /// The relying party's name for the account (`alice@example.com`).
    public var userName: String?
    /// The relying party's name for the person (`Alice Liddell`).
    public var userDisplayName: String?
    /// A discoverable (resident) credential: a sign-in without an allow list finds it.
    public var discoverable: Bool
    /// Made with user verification: its right requires the fingers enrolled then (`.biometryCurrentSet`), so
    /// enrolling or removing a finger ends it for good.
    public var madeWithUserVerification: Bool
    /// Signatures made so far; the next assertion carries this plus one.
    public var signatureCount: UInt32
    /// When it was made.
    public var created: Date
    /// Made with the `hmac-secret` extension: the right's secret holds its two CredRandom values (with and without
    /// user verification), which only the finger reads.
    public var hmacSecret: Bool? = nil
    /// The `credProtect` level it was made with (CTAP 2.1 §12.1): 2 keeps it from a sign-in without user verification
    /// that names no credentials, 3 from any sign-in without user verification; nil or 1 for none.
    public var protection: Int? = nil
    /// For a credential registered over U2F: the SHA-256 of the application (U2F sends no site's name, so the
    /// record's `relyingParty` is `u2f:` and this in hexadecimal).
    public var applicationParameter: [UInt8]? = nil

    /// Whether a sign-in may find this credential: with user verification always; without, per its `credProtect`
    /// level (2 only when the request names it in its allow list).
    func isOffered(verified: Bool, named: Bool) -> Bool {
        switch protection ?? 1 {
        case 3: verified
        case 2: verified || named
        default: true
        }
    }

    /// Whether this credential answers U2F requests for `application` (a SHA-256): a U2F registration's for its
    /// application, a CTAP2 credential's for its relying party's ID (CTAP 2.1 §10.3).
    func answers(application: [UInt8]) -> Bool {
        applicationParameter.map { $0 == application } ?? (Self.hash(relyingParty) == application)
    }

    /// SHA-256 of a relying party's ID (or a U2F AppID): what authenticator data, U2F and credential management
    /// name it by.
    static func hash(_ rpID: String) -> [UInt8] { Array(SHA256.hash(Data(rpID.utf8))) }

    /// The credential ID in hexadecimal, as `lactl fido list` shows it and `lactl fido delete` takes it.
    public var hexID: String { id.map { String(format: "%02x", $0) }.joined() }
}

/// The authenticator's credentials in the user's keychain. Each is an `LAPersistedRight` saved under `fido.<id>`, so
/// its P-256 key is held by the enclave (the TPM when localauthd has one) and signs only while the right is
/// authorized, by the finger (or, for a credential made without user verification, the finger or the passcode);
/// beside it a generic password item (service `lactl.fido.credential`, account the hexadecimal ID) holds its
/// ``FIDOCredential`` record as JSON.
public struct FIDOCredentials: Sendable {
    static let rightPrefix = "fido."
    static let recordService = "lactl.fido.credential"

    /// The keychain this store uses: nil for the process's default.
    let client: (any SecurityClient)?

    /// The store in the process's default keychain.
    public init() { client = nil }

    /// The store in `client`'s keychain.
    package init(client: any SecurityClient) { self.client = client }

    /// Makes a credential: a new right under the requirement user verification calls for, authorized first by
    /// `approve` (the user's presence), then saved with its record; with `secret`, the right keeps it as its own
    /// (`hmac-secret`'s CredRandom values).
    ///
    /// - Returns: the record and the key's public point (X9.63 uncompressed).
    /// - Throws: what `approve` or the keychain throws; nothing is kept then.
    func create(
        _ template: FIDOCredential, secret: Data? = nil, approve: @Sendable (LARight) async throws -> Void
    ) async throws -> (FIDOCredential, publicKey: [UInt8]) {
        try await withClient {
            let requirement: LAAuthenticationRequirement =
                template.madeWithUserVerification ? .biometryCurrentSet : .biometry(fallback: .devicePasscode)
            let right = LARight(requirement: requirement)
            try await approve(right)
            let identifier = Self.rightPrefix + template.hexID
            let persisted =
                if let secret {
                    try await LARightStore.shared.saveRight(right, identifier: identifier, secret: secret)
                } else {
                    try await LARightStore.shared.saveRight(right, identifier: identifier)
                }
            do {
                try Self.save(template, adding: true)
                return (template, Array(try await persisted.key.publicKey.bytes))
            } catch {
                try? await LARightStore.shared.removeRight(forIdentifier: identifier)
                throw error
            }
        }
    }

    /// Every credential's record (of `relyingParty` when given, with the U2F registrations whose application is its
    /// hash: the `appid` extension sends an AppID as the RP ID), newest first.
    public func credentials(relyingParty: String? = nil) async throws -> [FIDOCredential] {
        try await withClient {
            var query = Self.recordQuery(nil)
            query[kSecMatchLimit as String] = kSecMatchLimitAll
            query[kSecReturnData as String] = true
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as NSDictionary, &result)
            if status == errSecItemNotFound { return [] }
            guard status == errSecSuccess, let items = result as? [Data] else {
                throw Self.error(status, "the FIDO credentials cannot be read")
            }
            return items.compactMap { try? JSONDecoder().decode(FIDOCredential.self, from: $0) }
                .filter { credential in
                    guard let relyingParty else { return true }
                    return credential.relyingParty == relyingParty
                        || credential.applicationParameter == FIDOCredential.hash(relyingParty)
                }
                .sorted { $0.created > $1.created }
        }
    }

    /// The right of `credential`, authorized by `approve`.
    func authorize(
        _ credential: FIDOCredential, approve: @Sendable (LAPersistedRight) async throws -> Void
    ) async throws -> LAPersistedRight {
        try await withClient {
            let right = try await LARightStore.shared.right(forIdentifier: Self.rightPrefix + credential.hexID)
            try await approve(right)
            return right
        }
    }

    /// Whether `credential` still works: one made with user verification ends for good once the enrolled fingers
    /// change (its right's requirement is `.biometryCurrentSet`), and is then never offered.
    func isUsable(_ credential: FIDOCredential) async -> Bool {
        guard credential.madeWithUserVerification else { return true }
        let usable = try? await withClient { () async throws -> Bool in
            let right = try await LARightStore.shared.right(forIdentifier: Self.rightPrefix + credential.hexID)
            try await right.checkStillValid()
            return true
        }
        return usable ?? false
    }

    /// The secret of an authorized right (`hmac-secret`'s CredRandom values).
    func secret(of right: LAPersistedRight) async throws -> SecureBytes {
        try await withClient { SecureBytes(try await right.secret.rawData) }
    }

    /// Signs `data` (ECDSA P-256 with SHA-256, DER) with an authorized right's key.
    func sign(_ data: [UInt8], with right: LAPersistedRight) async throws -> [UInt8] {
        try await withClient {
            Array(try await right.key.sign(Data(data), algorithm: .ecdsaSignatureMessageX962SHA256))
        }
    }

    /// Counts one more signature of `credential`, on its stored record (never an older copy, so the count only
    /// grows); the count to put in its assertion.
    func countSignature(_ credential: FIDOCredential) async throws -> UInt32 {
        try await updateRecord(hexID: credential.hexID) { $0.signatureCount &+= 1 }.signatureCount
    }

    /// Changes the stored record of the credential whose hexadecimal ID is `hexID` with `change` (read, changed and
    /// written back, so fields `change` leaves alone keep their stored values).
    ///
    /// - Returns: the record as written.
    /// - Throws: `errSecItemNotFound` when there is no such credential.
    @discardableResult
    func updateRecord(
        hexID: String, _ change: @Sendable (inout FIDOCredential) -> Void
    ) async throws -> FIDOCredential {
        try await withClient {
            var query = Self.recordQuery(hexID)
            query[kSecReturnData as String] = true
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as NSDictionary, &result)
            guard status == errSecSuccess, let data = result as? Data,
                var record = try? JSONDecoder().decode(FIDOCredential.self, from: data)
            else { throw Self.error(status == errSecSuccess ? errSecDecode : status, "no FIDO credential \(hexID)") }
            change(&record)
            try Self.save(record, adding: false)
            return record
        }
    }

    /// The public point (X9.63 uncompressed) of `credential`'s key; no authorization needed.
    func publicKey(of credential: FIDOCredential) async throws -> [UInt8] {
        try await withClient {
            let right = try await LARightStore.shared.right(forIdentifier: Self.rightPrefix + credential.hexID)
            return Array(try await right.key.publicKey.bytes)
        }
    }

    /// Removes the credential whose hexadecimal ID is `hexID`: its right (and key) and its record.
    ///
    /// - Throws: `errSecItemNotFound` when there is none.
    public func delete(hexID: String) async throws {
        try await withClient {
            let status = SecItemDelete(Self.recordQuery(hexID) as NSDictionary)
            guard status == errSecSuccess else { throw Self.error(status, "no FIDO credential \(hexID)") }
            try? await LARightStore.shared.removeRight(forIdentifier: Self.rightPrefix + hexID)
        }
    }

    // MARK: The PIN

    /// The authenticator's PIN (CTAP 2.1's ClientPIN), as a generic password item (service `lactl.fido.pin`): the
    /// first 16 bytes of the PIN's SHA-256 when one is set, and the wrong guesses it still allows.
    struct PINRecord: Codable, Equatable, Sendable {
        /// The guesses a PIN allows before it blocks for good (until a reset).
        static let maximumRetries = 8
        var hash: [UInt8]?
        var retries: Int = maximumRetries
    }

    static let pinService = "lactl.fido.pin"

    /// The PIN's record; no PIN set when none was saved.
    func pinRecord() async throws -> PINRecord {
        try await withClient { try Self.readPIN()?.record ?? PINRecord() }
    }

    /// Changes the PIN's record with `change`, atomically against every other process on this keychain: the write
    /// names the generation it read (the item's comment) and starts over when another write came between, so two
    /// authenticators that count guesses at once lose none.
    ///
    /// - Returns: the record as written.
    @discardableResult
    func updatePIN(_ change: @Sendable (inout PINRecord) throws -> Void) async throws -> PINRecord {
        try await withClient {
            for _ in 0..<1_000 {
                let read = try Self.readPIN()
                var record = read?.record ?? PINRecord()
                try change(&record)
                let data = try JSONEncoder().encode(record)
                let next = String((read?.generation ?? 0) &+ 1)
                let status: OSStatus
                if let read {
                    var query = Self.pinQuery()
                    query[kSecAttrComment as String] = String(read.generation)
                    status = SecItemUpdate(
                        query as NSDictionary,
                        [kSecValueData as String: data, kSecAttrComment as String: next] as NSDictionary)
                } else {
                    var item = Self.pinQuery()
                    item[kSecValueData as String] = data
                    item[kSecAttrComment as String] = next
                    item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
                    status = SecItemAdd(item as NSDictionary, nil)
                }
                switch status {
                case errSecSuccess: return record
                case errSecItemNotFound, errSecDuplicateItem: continue  // another write came first: read again
                default: throw Self.error(status, "the FIDO PIN cannot be saved")
                }
            }
            throw Self.error(errSecInteractionNotAllowed, "the FIDO PIN kept changing under this write")
        }
    }

    /// Forgets the PIN (a reset).
    func removePIN() async throws {
        try await withClient {
            let status = SecItemDelete(Self.pinQuery() as NSDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else {
                throw Self.error(status, "the FIDO PIN cannot be removed")
            }
        }
    }

    private static func pinQuery() -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: pinService,
            kSecAttrAccount as String: "pin",
        ]
    }

    private static func readPIN() throws -> (record: PINRecord, generation: UInt64)? {
        var query = pinQuery()
        query[kSecReturnData as String] = true
        query[kSecReturnAttributes as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as NSDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let item = result as? [String: Any],
            let data = item[kSecValueData as String] as? Data,
            let record = try? JSONDecoder().decode(PINRecord.self, from: data),
            let generation = (item[kSecAttrComment as String] as? String).flatMap(UInt64.init)
        else { throw error(status == errSecSuccess ? errSecDecode : status, "the FIDO PIN cannot be read") }
        return (record, generation)
    }

    // MARK: Records

    static func recordQuery(_ hexID: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: recordService,
        ]
        if let hexID { query[kSecAttrAccount as String] = hexID }
        return query
    }

    private static func save(_ credential: FIDOCredential, adding: Bool) throws {
        let data = try JSONEncoder().encode(credential)
        let status: OSStatus
        if adding {
            var item = recordQuery(credential.hexID)
            item[kSecValueData as String] = data
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            status = SecItemAdd(item as NSDictionary, nil)
        } else {
            status = SecItemUpdate(
                recordQuery(credential.hexID) as NSDictionary, [kSecValueData as String: data] as NSDictionary)
        }
        guard status == errSecSuccess else {
            throw error(status, "the FIDO credential \(credential.hexID) cannot be saved")
        }
    }

    /// Runs `body` against this store's keychain.
    private func withClient<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        guard let client else { return try await body() }
        return try await KeychainClientSelection.$current.withValue(client) { try await body() }
    }

    static func error(_ status: OSStatus, _ message: String) -> NSError {
        NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: message])
    }
}
