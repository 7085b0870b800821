import Foundation
import KeychainServices
import LocalAuthentication
import SSHAgentProtocol
import SecurityClient

/// The agent's keys: each an `LAPersistedRight` saved in `LARightStore` under `ssh-key.<name>`, so its P-256 key is
/// held by the enclave under the right's requirement and signs only while the right is authorized.
public struct AgentKeyring: Sendable {
    /// The prefix of the rights' identifiers.
    static let identifierPrefix = "ssh-key."

    /// The keychain service of each key's settings (a generic password whose account is the key's name).
    static let settingsService = "lactl.ssh-key.settings"
    /// Apple's cap on a context's reuse window (`LATouchIDAuthenticationMaximumAllowableReuseDuration`), in seconds;
    /// a key's window may be longer only when created with `allowLongReuse`.
    public static let appleReuseLimit = 300

    /// A key's name, public key, requirement and reuse window.
    public struct Key: Sendable {
        /// The key's name (`lactl ssh-key create NAME`).
        public var name: String
        /// The P-256 public key's bytes (X9.63, uncompressed).
        public var publicKey: Data
        /// What its right requires: a ``Requirement``'s raw value (`biometryCurrentSet`, `biometry`…).
        public var requirement: String
        /// How long, in seconds, one approval lets the same program sign again without asking (0: every time).
        public var reuseSeconds: Int

        /// The agent's comment for the key, `lactl:<name>`.
        public var comment: String { "lactl:\(name)" }
        /// Its `authorized_keys` line.
        public var authorizedKeysLine: String { SSHKey.authorizedKeysLine(publicKey: publicKey, comment: comment) }
        var blob: [UInt8] { SSHKey.blob(publicKey: publicKey) }
    }

    /// The requirements a key can be made with.
    public enum Requirement: String, CaseIterable, Sendable {
        case biometryCurrentSet, biometry, userPresence, devicePasscode

        var laRequirement: LAAuthenticationRequirement {
            switch self {
            case .biometryCurrentSet: .biometryCurrentSet
            case .biometry: .biometry
            case .userPresence: .default
            // LAAuthenticationRequirement has no passcode-only form (nor does Apple's): the finger or the passcode.
            case .devicePasscode: .biometry(fallback: .devicePasscode)
            }
        }
    }

    /// The keychain this keyring uses: nil for the process's default (`LA_DATA_DIR`, …).
    let client: (any SecurityClient)?

    /// The keyring in the process's default keychain.
    public init() { client = nil }

    /// The keyring in `client`'s keychain.
    package init(client: any SecurityClient) { self.client = client }

    /// Makes a key called `name` (letters, digits, `-`, `_`, `.`) under `requirement`, whose approvals a program
    /// may reuse for `reuseSeconds` (at most ``appleReuseLimit`` unless `allowLongReuse`).
    ///
    /// - Throws: `errSecDuplicateItem` when the name is taken, `errSecParam` for a bad name or window.
    public func create(
        _ name: String, requirement: Requirement, reuseSeconds: Int = 0, allowLongReuse: Bool = false
    ) async throws -> Key {
        guard Self.isValidName(name) else {
            throw Self.error(errSecParam, "a key name is 1 to 64 letters, digits, '-', '_' or '.'")
        }
        guard reuseSeconds >= 0, reuseSeconds <= Self.appleReuseLimit || allowLongReuse, reuseSeconds <= 86_400
        else {
            throw Self.error(
                errSecParam,
                "a reuse window is 0 to \(Self.appleReuseLimit) seconds (Apple's limit), or up to 86400 when chosen "
                    + "explicitly")
        }
        return try await withClient {
            let right = try await LARightStore.shared.saveRight(
                LARight(requirement: requirement.laRequirement), identifier: Self.identifierPrefix + name)
            do {
                try Self.saveSettings(Settings(reuseSeconds: reuseSeconds), for: name)
            } catch {
                try? await LARightStore.shared.removeRight(forIdentifier: Self.identifierPrefix + name)
                throw error
            }
            return Key(
                name: name, publicKey: try await right.key.publicKey.bytes, requirement: requirement.rawValue,
                reuseSeconds: reuseSeconds)
        }
    }

    /// Every key, by name.
    public func keys() async throws -> [Key] {
        try await withClient {
            let settings = Self.allSettings()
            var keys: [Key] = []
            for identifier in try LARightStore.shared.identifiers().sorted()
            where identifier.hasPrefix(Self.identifierPrefix) {
                let name = String(identifier.dropFirst(Self.identifierPrefix.count))
                let right = try await LARightStore.shared.right(forIdentifier: identifier)
                keys.append(
                    Key(
                        name: name, publicKey: try await right.key.publicKey.bytes,
                        requirement: (try? LARightStore.shared.requirementName(forIdentifier: identifier)) ?? "?",
                        reuseSeconds: settings[name]?.reuseSeconds ?? 0))
            }
            return keys
        }
    }

    /// The key called `name`. - Throws: `errSecItemNotFound`.
    public func key(_ name: String) async throws -> Key {
        guard let key = try await keys().first(where: { $0.name == name }) else {
            throw Self.error(errSecItemNotFound, "no SSH key is called \(name)")
        }
        return key
    }

    /// Removes the key called `name` with its right and settings. - Throws: `errSecItemNotFound`.
    public func remove(_ name: String) async throws {
        try await withClient {
            try await LARightStore.shared.removeRight(forIdentifier: Self.identifierPrefix + name)
            // The settings go with the key; a key saved without settings has none to delete (errSecItemNotFound).
            _ = SecItemDelete(Self.settingsQuery(name) as NSDictionary)
        }
    }

    /// The key called `name`'s right, authorized with `reason` through `presenter`.
    func authorize(_ name: String, reason: String, presenter: (any AuthenticationPresenter)?) async throws
        -> LAPersistedRight
    {
        try await withClient {
            let right = try await LARightStore.shared.right(forIdentifier: Self.identifierPrefix + name)
            right.presenter = presenter
            try await right.authorize(localizedReason: reason)
            return right
        }
    }

    /// Signs `data` with an authorized right's key, in SSH's signature encoding.
    func sign(_ data: Data, with right: LAPersistedRight) async throws -> [UInt8] {
        try await withClient {
            let der = try await right.key.sign(data, algorithm: .ecdsaSignatureMessageX962SHA256)
            return try SSHKey.signature(der: der)
        }
    }

    /// Runs `body` against this keyring's keychain.
    private func withClient<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        guard let client else { return try await body() }
        return try await KeychainClientSelection.$current.withValue(client) { try await body() }
    }

    // MARK: Settings

    /// What a key's settings item holds (JSON).
    struct Settings: Codable {
        var reuseSeconds: Int
    }

    static func settingsQuery(_ name: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: settingsService,
        ]
        if let name { query[kSecAttrAccount as String] = name }
        return query
    }

    static func saveSettings(_ settings: Settings, for name: String) throws {
        // Replaced whole: the earlier settings, if any, go first (none is errSecItemNotFound, and fine).
        _ = SecItemDelete(settingsQuery(name) as NSDictionary)
        var item = settingsQuery(name)
        item[kSecValueData as String] = try JSONEncoder().encode(settings)
        item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        let status = SecItemAdd(item as NSDictionary, nil)
        guard status == errSecSuccess else { throw error(status, "the settings of SSH key \(name) cannot be saved") }
    }

    /// Every key's settings by name; a key without readable settings has none (reuse 0).
    static func allSettings() -> [String: Settings] {
        var query = settingsQuery(nil)
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        query[kSecReturnAttributes as String] = true
        query[kSecReturnData as String] = true
        var result: CFTypeRef?
        guard SecItemCopyMatching(query as NSDictionary, &result) == errSecSuccess,
            let items = result as? [[String: Any]]
        else { return [:] }
        var settings: [String: Settings] = [:]
        for item in items {
            guard let name = item[kSecAttrAccount as String] as? String,
                let data = item[kSecValueData as String] as? Data,
                let decoded = try? JSONDecoder().decode(Settings.self, from: data)
            else { continue }
            settings[name] = decoded
        }
        return settings
    }

    static func error(_ status: OSStatus, _ message: String) -> NSError {
        NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: message])
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy {
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0))
            }
    }
}
