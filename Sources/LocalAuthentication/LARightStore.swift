import Foundation
import KeychainServices
import SecurityClient

/// The store of persisted rights (`LARightStore`).
///
/// Rights are kept as keychain items of the calling application's access group on the engine of the current task,
/// so they survive restarts and are out of the way of other applications' queries: a record naming the right's
/// requirement, a permanent enclave P-256 key whose access control is the requirement (with private-key use), and
/// the secret, a generic-password item under the same requirement.
///
/// In embedded mode (the default) the access group is a convention, not a wall: any program of the same user can
/// name the group (`LA_ACCESS_GROUPS`) or read the store's key files, so it can see and use these items. Keeping
/// one program's rights from another takes the `localauthd` daemon.
///
/// Errors (Apple does not document them): an identifier that exists fails with `NSOSStatusErrorDomain`
/// `errSecDuplicateItem`, an unknown identifier with `errSecItemNotFound`. A saved right's requirement cannot be
/// changed; remove it and save it again.
public final class LARightStore: NSObject, Sendable {
    static let recordService = "swift-local-authentication.right"
    static let secretService = "swift-local-authentication.right-secret"
    static let keyTagPrefix = "swift-local-authentication.right-key."

    private static let instance = LARightStore()

    private override init() { super.init() }

    /// The shared store (Apple: "Clients should rely on the shared instance").
    public class var shared: LARightStore { instance }

    // MARK: Saving

    /// Saves `right` under `identifier`, with a new key and an empty secret.
    /// - Returns: the persisted right (its state is ``LARight/State-swift.enum/unknown``).
    public func saveRight(_ right: LARight, identifier: String) async throws -> LAPersistedRight {
        try await save(right, identifier: identifier, secret: nil)
    }

    /// Saves `right` under `identifier` with a new key and `secret`.
    public func saveRight(_ right: LARight, identifier: String, secret: Data) async throws -> LAPersistedRight {
        try await save(right, identifier: identifier, secret: secret)
    }

    /// Calls `completion` (on another thread) with ``saveRight(_:identifier:)``'s outcome.
    public func saveRight(
        _ right: LARight, identifier: String, completion: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void
    ) {
        let client = KeychainClientSelection.current
        Task.detached {
            await KeychainClientSelection.$current.withValue(client) {
                do { completion(try await self.saveRight(right, identifier: identifier), nil) } catch {
                    completion(nil, error)
                }
            }
        }
    }

    /// Calls `completion` (on another thread) with ``saveRight(_:identifier:secret:)``'s outcome.
    public func saveRight(
        _ right: LARight, identifier: String, secret: Data,
        completion: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void
    ) {
        let client = KeychainClientSelection.current
        Task.detached {
            await KeychainClientSelection.$current.withValue(client) {
                do { completion(try await self.saveRight(right, identifier: identifier, secret: secret), nil) } catch {
                    completion(nil, error)
                }
            }
        }
    }

    // MARK: Reading

    /// The right saved under `identifier`, as a new object in state ``LARight/State-swift.enum/unknown``.
    /// - Throws: `errSecItemNotFound` when there is none.
    public func right(forIdentifier identifier: String) async throws -> LAPersistedRight {
        let (record, publicKey) = try await keychainWork { () throws -> (RightRecord, SecKey) in
            let record = try Self.record(identifier)
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: record.keyTag,
                kSecReturnRef as String: true,
            ]
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as NSDictionary, &result)
            guard status == errSecSuccess, let key = result as? SecKey, let publicKey = SecKeyCopyPublicKey(key) else {
                throw Self.error(status == errSecSuccess ? errSecItemNotFound : status, "the right's key is missing")
            }
            return (record, publicKey)
        }
        return LAPersistedRight(identifier: identifier, record: record, publicKey: publicKey)
    }

    /// Calls `completion` (on another thread) with ``right(forIdentifier:)``'s outcome.
    public func right(
        forIdentifier identifier: String, completion: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void
    ) {
        let client = KeychainClientSelection.current
        Task.detached {
            await KeychainClientSelection.$current.withValue(client) {
                do { completion(try await self.right(forIdentifier: identifier), nil) } catch { completion(nil, error) }
            }
        }
    }

    // MARK: Removing

    /// Deauthorizes `right` and removes it with its key and secret.
    public func removeRight(_ right: LAPersistedRight) async throws {
        await right.deauthorize()
        try await KeychainClientSelection.$current.withValue(right.client) {
            try await removeRight(forIdentifier: right.identifier)
        }
    }

    /// Calls `completion` (on another thread) with ``removeRight(_:)``'s outcome.
    public func removeRight(_ right: LAPersistedRight, completion: @escaping @Sendable ((any Error)?) -> Void) {
        Task.detached {
            do {
                try await self.removeRight(right)
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// Removes the right saved under `identifier`, its key and its secret.
    /// - Throws: `errSecItemNotFound` when there is none.
    public func removeRight(forIdentifier identifier: String) async throws {
        try await keychainWork {
            let record = try Self.record(identifier)
            _ = SecItemDelete(
                [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: record.keyTag] as NSDictionary)
            _ = SecItemDelete(Self.secretQuery(identifier) as NSDictionary)
            let status = SecItemDelete(Self.recordQuery(identifier) as NSDictionary)
            guard status == errSecSuccess else { throw Self.error(status, "the right cannot be removed") }
        }
    }

    /// Calls `completion` (on another thread) with ``removeRight(forIdentifier:)``'s outcome.
    public func removeRight(forIdentifier identifier: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        let client = KeychainClientSelection.current
        Task.detached {
            await KeychainClientSelection.$current.withValue(client) {
                do {
                    try await self.removeRight(forIdentifier: identifier)
                    completion(nil)
                } catch {
                    completion(error)
                }
            }
        }
    }

    /// Removes every right of the calling application, with their keys and secrets.
    public func removeAllRights() async throws {
        for identifier in try await keychainWork({ try self.identifiers() }) {
            try await removeRight(forIdentifier: identifier)
        }
    }

    /// Calls `completion` (on another thread) with ``removeAllRights()``'s outcome.
    public func removeAllRights(completion: @escaping @Sendable ((any Error)?) -> Void) {
        let client = KeychainClientSelection.current
        Task.detached {
            await KeychainClientSelection.$current.withValue(client) {
                do {
                    try await self.removeAllRights()
                    completion(nil)
                } catch {
                    completion(error)
                }
            }
        }
    }

    // MARK: Listing (not in Apple's API; for lactl)

    /// One saved right as `lactl rights list` shows it.
    package struct Listing: Sendable, Equatable {
        package var identifier: String
        package var accessGroup: String
        package var requirement: String
    }

    /// The saved rights the calling application can see, sorted by identifier then access group.
    package func listing() throws -> [Listing] {
        var query = Self.recordQuery(nil)
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        query[kSecReturnAttributes as String] = true
        query[kSecReturnData as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as NSDictionary, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = result as? [[String: Any]] else {
            throw Self.error(status, "the rights cannot be listed")
        }
        return items.compactMap { item -> Listing? in
            guard let identifier = item[kSecAttrAccount as String] as? String else { return nil }
            let record = (item[kSecValueData as String] as? Data).flatMap {
                try? JSONDecoder().decode(RightRecord.self, from: $0)
            }
            return Listing(
                identifier: identifier, accessGroup: item[kSecAttrAccessGroup as String] as? String ?? "",
                requirement: record?.kind.rawValue ?? "unreadable")
        }.sorted { ($0.identifier, $0.accessGroup) < ($1.identifier, $1.accessGroup) }
    }

    /// The identifiers of the saved rights, sorted.
    package func identifiers() throws -> [String] {
        Array(Set(try listing().map(\.identifier))).sorted()
    }

    /// The requirement of the right saved under `identifier`, by name.
    package func requirementName(forIdentifier identifier: String) throws -> String {
        try Self.record(identifier).kind.rawValue
    }

    // MARK: Internals

    static func recordQuery(_ identifier: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: recordService,
        ]
        if let identifier { query[kSecAttrAccount as String] = identifier }
        return query
    }

    static func secretQuery(_ identifier: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: secretService,
            kSecAttrAccount as String: identifier,
        ]
    }

    static func error(_ status: OSStatus, _ message: String) -> NSError {
        NSError(
            domain: NSOSStatusErrorDomain, code: Int(status),
            userInfo: [NSLocalizedDescriptionKey: "\(message) (OSStatus \(status))"])
    }

    private static func record(_ identifier: String) throws -> RightRecord {
        var query = recordQuery(identifier)
        query[kSecReturnData as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as NSDictionary, &result)
        guard status == errSecSuccess, let data = result as? Data else {
            throw error(status, "no right is saved under \"\(identifier)\"")
        }
        do {
            return try JSONDecoder().decode(RightRecord.self, from: data)
        } catch {
            throw Self.error(errSecItemNotFound, "the right saved under \"\(identifier)\" is unreadable")
        }
    }

    private func save(_ right: LARight, identifier: String, secret: Data?) async throws -> LAPersistedRight {
        let requirement = right.requirement
        var enrolledSetHash: Data?
        if requirement.kind == .biometryCurrentSet {
            enrolledSetHash = try await LARight.enrolledSetHash(try? KeychainClientSelection.resolve())
            guard enrolledSetHash != nil else {
                throw LAError(.biometryNotEnrolled, "a .biometryCurrentSet right needs an enrolled finger")
            }
        }
        let hash = enrolledSetHash
        return try await keychainWork {
            let record = RightRecord(
                kind: requirement.kind, keyTag: Data((Self.keyTagPrefix + identifier).utf8),
                hasSecret: secret.map { !$0.isEmpty } ?? false, enrolledSetHash: hash)
            var recordItem = Self.recordQuery(identifier)
            recordItem[kSecValueData as String] = try JSONEncoder().encode(record)
            let added = SecItemAdd(recordItem as NSDictionary, nil)
            guard added == errSecSuccess else {
                throw Self.error(
                    added,
                    added == errSecDuplicateItem
                        ? "a right is already saved under \"\(identifier)\"" : "the right cannot be saved")
            }
            do {
                let parameters: [String: Any] = [
                    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                    kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                    kSecPrivateKeyAttrs as String: [
                        kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: record.keyTag,
                        kSecAttrAccessControl as String: try requirement.accessControl(forKey: true),
                    ] as [String: Any],
                ]
                let key = try throwingSecurityError { SecKeyCreateRandomKey(parameters as NSDictionary, $0) }
                guard let publicKey = SecKeyCopyPublicKey(key) else {
                    throw Self.error(errSecItemNotFound, "the right's key has no public key")
                }
                if let secret, !secret.isEmpty {
                    var item = Self.secretQuery(identifier)
                    item[kSecValueData as String] = secret
                    item[kSecAttrAccessControl as String] = try requirement.accessControl()
                    let status = SecItemAdd(item as NSDictionary, nil)
                    guard status == errSecSuccess else {
                        throw Self.error(status, "the right's secret cannot be saved")
                    }
                }
                return LAPersistedRight(identifier: identifier, record: record, publicKey: publicKey)
            } catch {
                _ = SecItemDelete(
                    [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: record.keyTag] as NSDictionary
                )
                _ = SecItemDelete(Self.secretQuery(identifier) as NSDictionary)
                _ = SecItemDelete(Self.recordQuery(identifier) as NSDictionary)
                throw error
            }
        }
    }
}
