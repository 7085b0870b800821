import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import Synchronization

/// A Secret Service item as the keychain keeps it.
struct StoredSecretItem: Equatable {
    /// The item's name in its collection (its object path's last part): the keychain item's account.
    var id: String
    var label: String
    var attributes: [String: String]
    var contentType: String
    /// Seconds since 1970.
    var created: UInt64
    var modified: UInt64
    /// Where an imported item came from (its keychain comment), nil for others.
    var origin: String? = nil
}

/// The Secret Service's persisted collections over the keychain: each item a generic password whose service is
/// `org.freedesktop.Secret/<collection>`, account the item's id, label the item's label, generic attribute
/// (`kSecAttrGeneric`) its attributes as JSON (keys sorted), description (`kSecAttrDescription`) its content type,
/// and data the secret. What `SecItemCopyMatching` returns for them is what `lactl keychain dump` prints.
///
/// What a collection lists (every item's attributes, label and dates, no secret) is kept between calls while the
/// keychain says nothing changed: a D-Bus client asks for the same item's properties call after call. Embedded, the
/// store's stamp (``SecurityClient/storeStamp()``) tells at once of any program's commit and of a lock; through
/// localauthd, its keychain events tell, as they arrive, and a search that finds nothing in the kept list asks
/// the keychain again (a program that just stored an item and hands its search to another finds it). A secret is
/// never kept: every read goes to the keychain, which checks the calling program each time. Used by one thread at a
/// time (the provider's serving thread, or GDBus's worker while the serving thread waits); the kept listings and the
/// event counts are shared with the watch's task.
final class KeychainSecrets {
    /// The keychain service of collection `name`'s items.
    static func service(_ collection: String) -> String { "org.freedesktop.Secret/" + collection }

    /// A failed keychain operation, with the keychain's status.
    struct Failure: Error, CustomStringConvertible {
        var status: OSStatus
        var operation: String
        var description: String {
            let text = SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
            return "\(operation): \(text)"
        }
        /// Whether the keychain refused the calling program (not on the item's list, and the user was not asked or
        /// said no), rather than failing.
        var isRefusal: Bool {
            [errSecAuthFailed, errSecInteractionNotAllowed, errSecUserCanceled].contains(status)
        }
        /// Whether the keychain answered that nobody may be asked: what a locked keychain answers too.
        var isInteractionNotAllowed: Bool { status == errSecInteractionNotAllowed }
    }

    /// A collection's items as listed, and where the keychain stood just before.
    private struct Listing {
        var stamp: StoreStamp?
        var events: UInt64
        var items: [StoredSecretItem]
        var byID: [String: StoredSecretItem]
    }

    /// The kept listings, by collection: shared with the watch's task, which drops them when the keychain locks
    /// (what a locked keychain seals stays out of this process's memory too).
    private final class Kept: Sendable {
        let listings = Mutex<[String: Listing]>([:])
    }

    private let kept = Kept()
    /// How the keychain tells of changes (``watch(lockChanged:)``).
    private var watcher: ChangeWatch?

    /// The keychain events seen so far, counted by a task of their own, which also tells of each lock and unlock.
    private final class ChangeWatch: Sendable {
        final class Counts: Sendable {
            let events = Atomic<UInt64>(0)
            /// Set when the stream ended (the connection to localauthd dropped): from then on, only stamps tell.
            let ended = Atomic<Bool>(false)
        }

        let client: any SecurityClient
        let counts = Counts()
        private let task: Task<Void, Never>

        init(client: any SecurityClient, kept: Kept, lockChanged: @escaping @Sendable (Bool) -> Void) {
            self.client = client
            // Subscribed before this returns (the stream's builder runs at once), so a listing made after it is
            // read after the subscription.
            let stream = client.keychainEvents()
            task = Task.detached { [counts] in
                for await event in stream {
                    counts.events.add(1, ordering: .sequentiallyConsistent)
                    if event.kind == .locked { kept.listings.withLock { $0.removeAll() } }
                    if event.kind == .locked || event.kind == .unlocked { lockChanged(event.kind == .locked) }
                }
                counts.ended.store(true, ordering: .sequentiallyConsistent)
            }
        }

        deinit { task.cancel() }
    }

    /// Starts watching the keychain of the current keychain client (call it inside that client's scope);
    /// `lockChanged` runs, on a thread of the watch's, each time the keychain locks (true) or unlocks (false).
    func watch(lockChanged: @escaping @Sendable (Bool) -> Void) {
        guard watcher == nil, let client = try? KeychainClientSelection.resolve() else { return }
        watcher = ChangeWatch(client: client, kept: kept, lockChanged: lockChanged)
    }

    /// Something that tells this cache the keychain changed, for a thread that changed it outside these calls (a
    /// prompt's unlock): what was kept, the lock state included, is asked again, before the change's event comes.
    func changeNotifier() -> @Sendable () -> Void {
        guard let counts = watcher?.counts else { return {} }
        return { counts.events.add(1, ordering: .sequentiallyConsistent) }
    }

    /// The keychain client watched (nil before ``watch(lockChanged:)``, or when there is none).
    var client: (any SecurityClient)? { watcher?.client }

    /// Runs `body` with the watched client as the keychain's (on a thread outside the scope ``watch(lockChanged:)``
    /// was called in).
    func withWatchedClient<T>(_ body: () -> T) -> T {
        guard let client else { return body() }
        return KeychainClientSelection.$current.withValue(client) { body() }
    }

    /// Where the keychain stands now, as a listing records it; nil when no listing can be kept (neither a stamp
    /// nor events tell of changes).
    private func standing() -> (stamp: StoreStamp?, events: UInt64)? {
        if watcher == nil { watch(lockChanged: { _ in }) }
        guard let watch = watcher else { return nil }
        let events = watch.counts.events.load(ordering: .sequentiallyConsistent)
        let stamp = watch.client.storeStamp()
        if stamp == nil, watch.counts.ended.load(ordering: .sequentiallyConsistent) { return nil }
        return (stamp, events)
    }

    /// The lock state last asked of localauthd, and the events seen then.
    private var lockKept: (events: UInt64, locked: Bool)?

    /// Whether the keychain is locked: embedded, from its stamp; through localauthd, asked again after an event.
    func isLocked() throws -> Bool {
        let now = standing()
        if let stamp = now?.stamp { return stamp.locked }
        if let now, let kept = lockKept, kept.events == now.events { return kept.locked }
        guard let client else { return true }
        let response: KeychainResponse
        do {
            response = try client.sendBlocking(.lockState)
        } catch let status as KeychainStatus {
            throw Failure(status: status.code.rawValue, operation: "ask whether the keychain is locked")
        }
        guard case .locked(let locked) = response else { return true }
        lockKept = now.map { ($0.events, locked) }
        return locked
    }

    /// Locks the keychain.
    func lock() throws {
        defer { forget() }
        guard let client else { throw Failure(status: errSecNotAvailable, operation: "lock the keychain") }
        do {
            _ = try client.sendBlocking(.lock)
        } catch let status as KeychainStatus {
            throw Failure(status: status.code.rawValue, operation: "lock the keychain")
        }
    }

    /// The kept listing of `collection` while nothing changed since it was made.
    private func keptListing(_ collection: String) -> Listing? {
        guard let listing = kept.listings.withLock({ $0[collection] }), let now = standing(),
            now.stamp == listing.stamp, now.events == listing.events
        else { return nil }
        return listing
    }

    /// Forgets every kept listing: after this provider's own writes, and when the keychain locks.
    func forget() {
        kept.listings.withLock { $0.removeAll() }
        lockKept = nil
    }

    /// Every item of `collection`; `fresh` asks the keychain even when a kept listing stands.
    func items(_ collection: String, fresh: Bool = false) throws -> [StoredSecretItem] {
        if !fresh, let listing = keptListing(collection) { return listing.items }
        return try list(collection).items
    }

    /// Item `id` of `collection` without its secret (from the kept listing); nil when there is no such item.
    func item(_ collection: String, _ id: String) throws -> StoredSecretItem? {
        if let listing = keptListing(collection) { return listing.byID[id] }
        return try list(collection).byID[id]
    }

    /// Whether the kept listing of `collection` may lag behind the keychain (events tell of changes, and they
    /// arrive after the change): a search that finds nothing in it asks again.
    func mayLag(_ collection: String) -> Bool {
        kept.listings.withLock { $0[collection].map { $0.stamp == nil } ?? false }
    }

    private func list(_ collection: String) throws -> Listing {
        let before = standing()
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Self.service(collection),
            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        var items: [StoredSecretItem] = []
        if status != errSecItemNotFound {
            guard status == errSecSuccess else {
                kept.listings.withLock { $0[collection] = nil }
                throw Failure(status: status, operation: "list the items")
            }
            items = ((result as? [[String: Any]]) ?? []).compactMap(Self.item(from:)).sorted { $0.id < $1.id }
        }
        let listing = Listing(
            stamp: before?.stamp, events: before?.events ?? 0, items: items,
            byID: Dictionary(items.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }))
        kept.listings.withLock { listings in
            // Not kept when an event came meanwhile: a lock's event may have dropped the listings already, and what
            // a locked keychain seals must not stay here (the event is counted before the listings are dropped).
            let current = watcher?.counts.events.load(ordering: .sequentiallyConsistent)
            listings[collection] = before == nil || current != before?.events ? nil : listing
        }
        return listing
    }

    /// Item `id` of `collection` and its secret, read from the keychain (never kept); nil when there is no such item.
    /// `mayAsk` false: a read that would ask the user fails with `errSecInteractionNotAllowed` instead.
    func itemWithSecret(_ collection: String, _ id: String, mayAsk: Bool = true) throws -> (
        item: StoredSecretItem, secret: SecureBytes
    )? {
        var query = Self.query(collection, id)
        query[kSecReturnAttributes as String] = true
        query[kSecReturnData as String] = true
        if !mayAsk { query[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIFail }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let attributes = result as? [String: Any],
            let item = Self.item(from: attributes)
        else {
            throw Failure(status: status == errSecSuccess ? errSecDecode : status, operation: "read the item")
        }
        guard let data = attributes[kSecValueData as String] as? Data else {
            throw Failure(status: errSecDecode, operation: "read the secret")
        }
        return (item, SecureBytes(data))
    }

    /// Adds an item; its id.
    ///
    /// - Parameters:
    ///   - origin: where the item came from (kept as its comment, `kSecAttrComment`), for an import.
    ///   - trust: which programs use the secret without the user being asked.
    ///   - id: the item's id (nil: a new random one).
    ///   - accessible: its protection class (`kSecAttrAccessible…`; nil: the keychain's default, while unlocked).
    func add(
        _ collection: String, label: String, attributes: [String: String], contentType: String, secret: SecureBytes,
        origin: String? = nil, trust: Trust = .caller, id: String? = nil, accessible: CFString? = nil
    ) throws -> String {
        let id = id ?? UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        var item = Self.query(collection, id)
        if let accessible { item[kSecAttrAccessible as String] = accessible }
        item[kSecAttrLabel as String] = label
        item[kSecAttrGeneric as String] = try Self.encoded(attributes)
        item[kSecAttrDescription as String] = contentType
        item[kSecValueData as String] = secret.withUnsafeBytes { Data($0) }
        if let origin { item[kSecAttrComment as String] = origin }
        if trust != .everyProgram {
            // nil: the calling program alone (the D-Bus client the request is made for, as localauthd identified
            // it); an empty list: no program. Any other program's use of the secret asks the user.
            var access: SecAccess?
            let trusted: CFArray? = trust == .caller ? nil : [] as CFArray
            guard SecAccessCreate(label as CFString, trusted, &access) == errSecSuccess, let access else {
                throw Failure(status: errSecParam, operation: "make the item's trusted-application list")
            }
            item[kSecAttrAccess as String] = access
        }
        let status = SecItemAdd(item as CFDictionary, nil)
        forget()
        guard status == errSecSuccess else { throw Failure(status: status, operation: "add the item") }
        return id
    }

    /// Which programs use a new item's secret without the user being asked.
    enum Trust {
        /// The calling program alone (an item made through the provider).
        case caller
        /// None: every program is asked once.
        case noProgram
        /// Every program of the user (no list), as under a provider without per-program access.
        case everyProgram
    }

    /// Changes what is given of item `id`.
    func update(
        _ collection: String, _ id: String, label: String? = nil, attributes: [String: String]? = nil,
        contentType: String? = nil, secret: SecureBytes? = nil
    ) throws {
        var changes: [String: Any] = [:]
        if let label { changes[kSecAttrLabel as String] = label }
        if let attributes { changes[kSecAttrGeneric as String] = try Self.encoded(attributes) }
        if let contentType { changes[kSecAttrDescription as String] = contentType }
        if let secret { changes[kSecValueData as String] = secret.withUnsafeBytes { Data($0) } }
        let status = SecItemUpdate(Self.query(collection, id) as CFDictionary, changes as CFDictionary)
        forget()
        guard status == errSecSuccess else { throw Failure(status: status, operation: "change the item") }
    }

    func delete(_ collection: String, _ id: String) throws {
        let status = SecItemDelete(Self.query(collection, id) as CFDictionary)
        forget()
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw Failure(status: status, operation: "delete the item")
        }
    }

    private static func query(_ collection: String, _ id: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service(collection),
            kSecAttrAccount as String: id,
        ]
    }

    static func encoded(_ attributes: [String: String]) throws -> Data {
        try JSONSerialization.data(withJSONObject: attributes, options: [.sortedKeys])
    }

    /// Whether `id` can be an item's name in an object path (`[A-Za-z0-9_]`, as the provider makes them): an item
    /// another program put under the service with another account is left out, not served under a path D-Bus
    /// refuses.
    static func isItemName(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 255
            && id.utf8.allSatisfy {
                ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95
            }
    }

    private static func item(from attributes: [String: Any]) -> StoredSecretItem? {
        guard let id = attributes[kSecAttrAccount as String] as? String, isItemName(id) else { return nil }
        var map: [String: String] = [:]
        if let data = attributes[kSecAttrGeneric as String] as? Data,
            let decoded = (try? JSONSerialization.jsonObject(with: data)) as? [String: String]
        {
            map = decoded
        }
        let created = (attributes[kSecAttrCreationDate as String] as? Date)?.timeIntervalSince1970 ?? 0
        let modified = (attributes[kSecAttrModificationDate as String] as? Date)?.timeIntervalSince1970 ?? created
        return StoredSecretItem(
            id: id, label: attributes[kSecAttrLabel as String] as? String ?? "", attributes: map,
            contentType: attributes[kSecAttrDescription as String] as? String ?? "text/plain",
            created: UInt64(max(0, created)), modified: UInt64(max(0, modified)),
            origin: attributes[kSecAttrComment as String] as? String)
    }
}
