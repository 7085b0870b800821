import EmbeddedEngine
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import WorkThreads

/// When an item's data can be read, with Apple's `kSecAttrAccessible` values as raw values.
public enum KeychainAccessibility: String, Sendable, CaseIterable {
    /// `kSecAttrAccessibleWhenUnlocked` (the default).
    case whenUnlocked = "ak"
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`.
    case whenUnlockedThisDeviceOnly = "aku"
    /// `kSecAttrAccessibleAfterFirstUnlock`.
    case afterFirstUnlock = "ck"
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`.
    case afterFirstUnlockThisDeviceOnly = "cku"
    /// `kSecAttrAccessibleAlways`.
    case always = "dk"
    /// `kSecAttrAccessibleAlwaysThisDeviceOnly`.
    case alwaysThisDeviceOnly = "dku"
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`.
    case whenPasscodeSetThisDeviceOnly = "akpu"
}

/// A keychain for Swift code that prefers types to dictionaries. Every method sends the same engine request the
/// SecItem functions send, so rules, errors and stored items are the same.
public struct Keychain: Sendable {
    private let explicitClient: (any SecurityClient)?

    /// The keychain the SecItem functions use: the store named by `LA_DATA_DIR` (default
    /// `$XDG_DATA_HOME/local-authentication`), with the access groups in `LA_ACCESS_GROUPS` (default: one group
    /// named after the executable).
    public static let `default` = Keychain(client: nil)

    package init(client: (any SecurityClient)?) {
        explicitClient = client
    }

    /// A keychain stored in `directory` (created 0700 on first use) for a caller holding `accessGroups`.
    ///
    /// - Throws: `KeychainError` when the store cannot be opened.
    public init(directory: URL, accessGroups: [String]) throws {
        do {
            explicitClient = try EmbeddedClient(
                configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: accessGroups))
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
    }

    func send(_ request: KeychainRequest) throws -> KeychainResponse {
        do {
            return try (explicitClient ?? KeychainClientSelection.resolve()).sendBlocking(request)
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
    }

    // MARK: Items

    /// Adds `item`. - Throws: `KeychainError` (`.duplicateItem` when its primary key exists).
    public func add(_ item: some KeychainItem) throws {
        guard let item = item as? any KeychainItemCoding else { throw KeychainError(status: errSecParam) }
        var attributes = item.keychainAttributes
        attributes[ItemKey.itemClass] = .string(type(of: item).itemClass)
        _ = try send(.add(attributes))
    }

    /// The items `query` matches, with their attributes and data; empty when none match.
    public func items<Item: KeychainItem>(matching query: KeychainQuery<Item>) throws -> [Item] {
        guard let coding = Item.self as? any KeychainItemCoding.Type else { throw KeychainError(status: errSecParam) }
        var dictionary = query.filters
        dictionary[ItemKey.itemClass] = .string(coding.itemClass)
        dictionary[ItemKey.returnAttributes] = .bool(true)
        if query.includesData { dictionary[ItemKey.returnData] = .bool(true) }
        dictionary[ItemKey.matchLimit] = query.limit.map { .integer(Int64($0)) } ?? .string(ItemKey.matchLimitAll)
        let response: KeychainResponse
        do {
            response = try send(.copyMatching(dictionary))
        } catch KeychainError.Code.itemNotFound {
            return []
        }
        guard case .items(let results) = response else { return [] }
        return results.items.compactMap { result in
            result.attributes.flatMap {
                coding.init(keychainAttributes: $0, data: result.data?.unprotectedData()) as? Item
            }
        }
    }

    /// Changes every item `query` matches: the attributes `change` sets, and the data when given.
    ///
    /// - Throws: `KeychainError` (`.itemNotFound`, `.duplicateItem`).
    public func update<Item: KeychainItem>(
        _ query: KeychainQuery<Item>, setting change: KeychainQuery<Item>.Change
    ) throws {
        guard let coding = Item.self as? any KeychainItemCoding.Type else { throw KeychainError(status: errSecParam) }
        var dictionary = query.filters
        dictionary[ItemKey.itemClass] = .string(coding.itemClass)
        var attributes = change.attributes
        if let data = change.data { attributes[ItemKey.valueData] = .secret(SecureBytes(data)) }
        _ = try send(.update(query: dictionary, attributes: attributes))
    }

    /// Deletes every item `query` matches. - Throws: `KeychainError.Code.itemNotFound` when none does.
    public func delete<Item: KeychainItem>(_ query: KeychainQuery<Item>) throws {
        guard let coding = Item.self as? any KeychainItemCoding.Type else { throw KeychainError(status: errSecParam) }
        var dictionary = query.filters
        dictionary[ItemKey.itemClass] = .string(coding.itemClass)
        _ = try send(.delete(dictionary))
    }

    // MARK: Convenience for passwords

    /// The generic password for `service` and `account`, or nil.
    public func genericPassword(service: String, account: String) throws -> GenericPassword? {
        try items(matching: .genericPasswords(service: service, account: account).limit(1)).first
    }

    /// The internet password for `server` and `account`, or nil.
    public func internetPassword(server: String, account: String) throws -> InternetPassword? {
        try items(matching: .internetPasswords(server: server, account: account).limit(1)).first
    }

    // MARK: Lock state, events, backups

    /// Locks the keychain: `whenUnlocked` items become unreadable until `unlock()`.
    public func lock() throws { _ = try send(.lock) }

    /// Unlocks the keychain once the user's passcode passes PAM, asked through the keychain's client's default
    /// presenter (the terminal, for programs that have one and do not set `LA_PRESENTER=none`).
    ///
    /// Blocks the calling thread while the user types. Failed attempts count toward the passcode waits.
    /// - Throws: `KeychainError`: `.interactionNotAllowed` when nobody can be asked, `.userCanceled`, `.authFailed`
    ///   for a wrong passcode or while a wait after failures runs.
    public func unlock() throws {
        let client = try explicitClient ?? KeychainClientSelection.resolve()
        let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "Unlock the keychain"))
        do {
            _ = try BlockingBridge.wait {
                try await client.send(.unlockWithPasscode(options), presenter: client.defaultPresenter)
            }
        } catch {
            throw KeychainError(KeychainStatus(authenticationFailure: error))
        }
    }

    /// Whether the keychain is locked.
    public var isLocked: Bool {
        get throws {
            guard case .locked(let locked) = try send(.lockState) else { return true }
            return locked
        }
    }

    /// Keychain events (items added, updated, deleted in the caller's access groups; lock and unlock) from now
    /// on. Embedded mode sees the changes made through this process's engine.
    public func events() throws -> KeychainEvents {
        do {
            return KeychainEvents(stream: try (explicitClient ?? KeychainClientSelection.resolve()).keychainEvents())
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
    }

    /// Writes every item the caller may see, except `…ThisDeviceOnly` ones, enclave keys and those under an
    /// access-control list, to `file` (mode 0600, replaced atomically), encrypted under a key derived from `password`
    /// (scrypt). The engine seals the items; this program writes the file with its own rights.
    ///
    /// - Returns: the number of items written.
    public func exportBackup(to file: URL, password: some ContiguousBytes) throws -> Int {
        try exportBackup(to: file, secret: password.withUnsafeBytes { SecureBytes($0) }).exported
    }

    /// `exportBackup(to:password:)` for a password already in zeroizing memory.
    ///
    /// - Returns: the items written, and the items the caller may see that stayed behind (`…ThisDeviceOnly`, enclave
    ///   keys, or under an access-control list), which no restore of this file brings back.
    package func exportBackup(to file: URL, secret: SecureBytes) throws -> (exported: Int, leftBehind: Int) {
        guard case .exportedBackup(let contents, let count, let skipped) = try send(.exportBackup(password: secret))
        else {
            return (0, 0)
        }
        do {
            try BackupFiles.write(contents, to: file)
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
        return (count, skipped)
    }

    /// Adds the items of a backup `file`; items whose primary key already exists stay as they are.
    ///
    /// - Returns: the number of items added. - Throws: `.authFailed` for a wrong password.
    public func importBackup(from file: URL, password: some ContiguousBytes) throws -> Int {
        try importBackup(from: file, secret: password.withUnsafeBytes { SecureBytes($0) }).added
    }

    /// `importBackup(from:password:)` for a password already in zeroizing memory.
    ///
    /// - Returns: the items added, and the backup's items not added: already present (they stay as they are),
    ///   `…ThisDeviceOnly`, identities, or in an access group the caller may not use.
    package func importBackup(from file: URL, secret: SecureBytes) throws -> (added: Int, notAdded: Int) {
        let contents: Data
        do {
            contents = try BackupFiles.read(file)
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
        guard case .backup(let count, let skipped) = try send(.importBackup(contents: contents, password: secret))
        else {
            return (0, 0)
        }
        return (count, skipped)
    }

    /// Recovers a damaged store from a backup `file`: the damaged database is moved aside (kept) and the backup's
    /// items fill a fresh one (``KeychainRequest/restoreBackup(contents:password:)``).
    ///
    /// - Returns: the items restored, the backup's items not restored (as ``importBackup(from:secret:)``), and where
    ///   the damaged file was moved.
    package func restoreBackup(from file: URL, secret: SecureBytes) throws -> (
        count: Int, notRestored: Int, setAside: String
    ) {
        let contents: Data
        do {
            contents = try BackupFiles.read(file)
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
        let answer = try send(.restoreBackup(contents: contents, password: secret))
        guard case .restoredBackup(let count, let skipped, let aside) = answer else {
            throw KeychainError(KeychainStatus(.internalComponent, "an unexpected answer to a restore"))
        }
        return (count, skipped, aside)
    }

    /// The store's health (``KeychainRequest/checkStore``).
    package func checkStore() throws -> StoreCheckReport {
        guard case .storeCheck(let report) = try send(.checkStore) else {
            throw KeychainError(KeychainStatus(.internalComponent, "an unexpected answer to a check"))
        }
        return report
    }
}

/// Something that happened to the keychain.
public struct KeychainEvent: Sendable, Hashable {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        /// An item was added.
        case added
        /// An item was changed.
        case updated
        /// An item was deleted.
        case deleted
        /// The keychain was locked.
        case locked
        /// The keychain was unlocked.
        case unlocked
    }

    /// What happened.
    public var kind: Kind
    /// The item's `kSecClass` value (nil for lock and unlock).
    public var itemClass: String?
    /// The item's access group (nil for lock and unlock).
    public var accessGroup: String?
    /// The item's persistent reference (nil for lock and unlock).
    public var persistentReference: Data?

    init(_ event: EngineEvent) {
        kind =
            switch event.kind {
            case .added: .added
            case .updated: .updated
            case .deleted: .deleted
            case .locked: .locked
            case .unlocked: .unlocked
            }
        itemClass = event.itemClass?.rawValue
        accessGroup = event.accessGroup
        persistentReference = event.persistentReference
    }
}

/// An asynchronous sequence of keychain events; it ends when dropped.
public struct KeychainEvents: AsyncSequence, Sendable {
    /// A keychain event.
    public typealias Element = KeychainEvent

    let stream: AsyncStream<EngineEvent>

    /// Iterates events as they happen.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<EngineEvent>.AsyncIterator

        /// The next event.
        public mutating func next() async -> KeychainEvent? {
            await base.next().map(KeychainEvent.init)
        }
    }

    /// Starts iterating.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}
