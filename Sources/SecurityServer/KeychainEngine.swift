import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

/// The keychain engine: the only code that reads or writes keychain state. It applies Keychain Services' rules
/// (classes, primary keys, access groups, protection classes, synchronizable, access control) to requests and
/// keeps items in an encrypted `KeychainDatabase` with keys from the `Enclave`.
///
/// Thread-safe: requests may arrive from any thread; each runs in one SQLite transaction, so a failed request
/// changes nothing.
package final class KeychainEngine: Sendable {
    /// The store directory (0700).
    package let directory: URL
    let enclave: Enclave
    let database: KeychainDatabase
    let sealer: ItemSealer
    let evaluator: any AccessControlEvaluator
    /// The authentication contexts (`LAContext`s) this engine serves, when it was given authenticators.
    package let authentication: AuthenticationContexts?
    private let hub = EngineEventHub()

    /// Opens (creating on first use) the store in `directory`.
    ///
    /// - Parameters:
    ///   - evaluator: decides access-control lists; by default the credentials of the authentication contexts,
    ///     or, without contexts, nothing satisfies a list.
    ///   - authentication: how the authenticators behind `LAContext` are set up; their attempt counters are
    ///     authenticated under this store's keybag. A passcode success through them also unlocks the keychain's
    ///     classes and records that a passcode is set.
    /// - Throws: `KeychainStatus` (`errSecIO`, `errSecDecode`) when the files cannot be created or opened.
    package init(
        directory: URL, evaluator: (any AccessControlEvaluator)? = nil,
        authentication configuration: AuthenticationConfiguration? = nil
    ) throws {
        self.directory = directory
        do {
            enclave = try Enclave(directory: directory)
            database = try KeychainDatabase(directory: directory)
        } catch {
            throw Self.status(error)
        }
        let enclave = self.enclave
        let authentication: AuthenticationContexts?
        if let configuration {
            do {
                let policy = try AttemptPolicy(
                    directory: configuration.stateDirectory, integrityKey: enclave.attemptKey,
                    mayStartFresh: enclave.attemptKeyIsNew, clock: configuration.clock)
                authentication = try AuthenticationContexts(configuration: configuration, attemptPolicy: policy)
            } catch {
                throw KeychainStatus(.io, "the authentication state cannot be opened")
            }
        } else {
            authentication = nil
        }
        sealer = ItemSealer(enclave: enclave)
        self.authentication = authentication
        self.evaluator =
            evaluator ?? authentication.map { ContextAccessControlEvaluator(contexts: $0) } ?? NoCredentialEvaluator()
        let hub = self.hub
        let database = self.database
        let sealer = self.sealer
        authentication?.onPasscodeSuccess {
            // A verified passcode is proof that one is set, for kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly.
            if !enclave.isPasscodeSet { try? enclave.setPasscodeSet(true) }
            guard enclave.isLocked else { return }
            if (try? enclave.unlock()) != nil {
                hub.emit([EngineEvent(kind: .unlocked)])
                Self.resealLegacyRows(database: database, sealer: sealer, enclave: enclave)
            }
        }
        Self.resealLegacyRows(database: database, sealer: sealer, enclave: enclave)
    }

    /// Re-seals the rows sealed before generations existed, whose class key is available now, so each part of
    /// them is bound to the others and to a version (a row updated before this release could otherwise take back
    /// an earlier attributes blob). Rows of a locked class wait for the next unlock; a row that does not open is
    /// left as it is (reading it reports `errSecDecode`).
    static func resealLegacyRows(database: KeychainDatabase, sealer: ItemSealer, enclave: Enclave) {
        // A read first (an index lookup): opening a store must not take SQLite's write lock when there is nothing
        // to re-seal, which is every open after the first.
        guard (try? database.read({ try $0.legacyItems().isEmpty })) == false else { return }
        _ = try? database.write { transaction in
            for row in try transaction.legacyItems() {
                guard let protectionClass = ProtectionClass(rawValue: row.protectionClass),
                    enclave.isAvailable(protectionClass),
                    let item = try? sealer.open(row),
                    let sealedValue = try transaction.value(rowID: row.rowID),
                    let data = try? sealer.openData(item, sealedValue: sealedValue)
                else { continue }
                try transaction.update(
                    try sealer.seal(row, attributes: item.attributes, data: data, protectionClass: protectionClass))
            }
        }
    }

    /// Serves one request for `caller`.
    ///
    /// - Throws: `KeychainStatus` with the `OSStatus` Keychain Services returns.
    package func handle(_ request: KeychainRequest, caller: CallerIdentity) throws -> KeychainResponse {
        do {
            switch request {
            case .add(let attributes):
                return try add(ItemQuery.parse(attributes, for: .add), caller: caller).map(KeychainResponse.items)
                    ?? .success
            case .copyMatching(let query):
                return .items(try copyMatching(ItemQuery.parse(query, for: .copyMatching), caller: caller))
            case .update(let query, let attributes):
                try update(ItemQuery.parse(query, for: .update), changes: attributes, caller: caller)
                return .success
            case .delete(let query):
                try delete(ItemQuery.parse(query, for: .delete), caller: caller)
                return .success
            case .lock:
                try enclave.lock()
                hub.emit([EngineEvent(kind: .locked)])
                return .success
            case .lockState:
                return .locked(enclave.isLocked)
            case .exportBackup(let file, let password):
                let (count, skipped) = try exportBackup(to: file, password: password, caller: caller)
                return .backup(count: count, skipped: skipped)
            case .importBackup(let file, let password):
                let (count, skipped) = try importBackup(from: file, password: password, caller: caller)
                return .backup(count: count, skipped: skipped)
            }
        } catch {
            throw Self.status(error)
        }
    }

    /// Events `caller` may see (items in its access groups, lock and unlock), from now on, in this process.
    package func events(for caller: CallerIdentity) -> AsyncStream<EngineEvent> {
        hub.subscribe(caller)
    }

    func hubEmit(_ events: [EngineEvent]) { hub.emit(events) }

    /// Records whether a passcode is set. Turning it off deletes every `akpu` item, as Apple does.
    package func setPasscodeSet(_ isSet: Bool) throws {
        do {
            if !isSet {
                let events = try database.write { transaction in
                    var events: [EngineEvent] = []
                    for row in try transaction.allItems()
                    where row.protectionClass == ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue {
                        try transaction.delete(rowID: row.rowID)
                        events.append(event(.deleted, row))
                    }
                    return events
                }
                hub.emit(events)
            }
            try enclave.setPasscodeSet(isSet)
        } catch {
            throw Self.status(error)
        }
    }

    // MARK: Add

    private func add(_ query: ItemQuery, caller: CallerIdentity) throws -> ItemResults? {
        let itemClass = query.itemClass!
        guard let group = query.accessGroup ?? caller.defaultAccessGroup else {
            throw KeychainStatus(.missingEntitlement, "the caller holds no keychain access group")
        }
        guard caller.mayAccess(group) else {
            throw KeychainStatus(.missingEntitlement, "the caller does not hold access group \(group)")
        }
        var attributes = query.attributes
        let protectionClass = try Self.protectionClass(of: attributes)
        let synchronizable = query.synchronizable == .yes
        if protectionClass.isThisDeviceOnly && synchronizable {
            throw KeychainStatus(.param, "a ThisDeviceOnly item cannot be synchronizable")
        }
        if protectionClass == .whenPasscodeSetThisDeviceOnly { try notePasscodeIfSet() }
        if itemClass == .key, case .accessControl(let policy) = attributes["accc"], AccessRequirement.usesPrivateKey(policy),
            attributes["tkid"] != .string(Self.secureEnclaveToken)
        {
            // Apple: privateKeyUsage is "required for SE keys" and scopes the list to operations only the Secure
            // Enclave performs; a software key under it would be stored readable and usable without any check.
            throw KeychainStatus(.param, "kSecAccessControlPrivateKeyUsage needs kSecAttrTokenIDSecureEnclave")
        }
        let schema = AttributeSchema.attributes(of: itemClass)
        for key in AttributeSchema.primaryKey(of: itemClass) where attributes[key] == nil {
            attributes[key] = AttributeSchema.defaultValue(for: schema[key]!)
        }
        let now = Date()
        attributes["agrp"] = .string(group)
        attributes["pdmn"] = .string(protectionClass.rawValue)
        attributes["sync"] = .bool(synchronizable)
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        var data = SecureBytes(query.valueData ?? Data())
        if case .accessControl(var policy) = attributes["accc"] {
            if AccessRequirement.bindsEnrolledSet(policy), let authentication {
                // Bound now: after any enrollment change the item can never be satisfied again.
                policy.boundStateHash = try authentication.currentStateHash() ?? Data()
                attributes["accc"] = .accessControl(policy)
            }
            data = try sealForApplicationPassword(data, policy: policy, context: query.authenticationContext)
        }
        let blindIndex = sealer.blindIndex(
            itemClass: itemClass, accessGroup: group, synchronizable: synchronizable, attributes: attributes)
        let stored = try database.write { transaction in
            let row = StoredItem(
                rowID: try transaction.nextRowID(), itemClass: itemClass.rawValue, accessGroup: group,
                protectionClass: protectionClass.rawValue, synchronizable: synchronizable, blindIndex: blindIndex,
                attributes: Data(), wrappedKey: Data(), value: nil)
            let sealed = try sealer.seal(row, attributes: attributes, data: data, protectionClass: protectionClass)
            try transaction.insert(sealed)
            return sealed
        }
        hub.emit([event(.added, stored)])
        guard !query.returns.isEmpty else { return nil }
        let opened = ItemSealer.OpenedItem(
            row: stored, itemClass: itemClass, protectionClass: protectionClass, attributes: attributes)
        let result = try database.read { transaction in
            try self.result(for: opened, query: query, caller: caller, transaction: transaction)
        }
        return ItemResults(returns: query.returns, isSingle: true, items: result.map { [$0] } ?? [])
    }

    // MARK: Copy matching

    private func copyMatching(_ query: ItemQuery, caller: CallerIdentity) throws -> ItemResults {
        // kSecReturnRef on a password is not an error on Apple platforms: the result simply carries no reference.
        return try database.read { transaction in
            var results: [ItemResult] = []
            let matches = try matchingItems(
                query, caller: caller, transaction: transaction,
                includingValues: query.returns.contains(.data) || query.returns.contains(.reference),
                mayLeaveAttributesSealed: true)
            for item in matches {
                if let limit = query.limit, results.count >= limit { break }
                // Opening the data checks the class key itself (one keybag check per item, not two).
                if !Self.needsData(query.returns, item.itemClass) { try requireAvailable(item) }
                if let result = try result(for: item, query: query, caller: caller, transaction: transaction) {
                    results.append(result)
                }
            }
            guard !results.isEmpty else { throw KeychainStatus(.itemNotFound, "no item matches") }
            return ItemResults(returns: query.returns, isSingle: query.limit == 1, items: results)
        }
    }

    /// The result for one matched item, or nil when its access control says to skip it.
    private func result(
        for item: ItemSealer.OpenedItem, query: ItemQuery, caller: CallerIdentity, transaction: StoreTransaction
    ) throws -> ItemResult? {
        var result = ItemResult(itemClass: query.itemClass ?? item.itemClass)
        let needsData = Self.needsData(query.returns, item.itemClass)
        if needsData, let policy = item.accessControl {
            switch evaluator.authorize(
                policy, operation: .readData, authenticationUI: query.authenticationUI,
                context: query.authenticationContext) {
            case .allowed: break
            case .skip: return nil
            case .denied(let code): throw KeychainStatus(code, "the item's access control is not satisfied")
            }
        }
        var attributes: [String: KeychainValue] = [:]
        if query.returns.contains(.attributes) || query.returns.contains(.reference) {
            attributes = item.attributes
            attributes["class"] = .string(item.itemClass.rawValue)
        }
        if query.returns.contains(.attributes) {
            // Apple returns the persistent reference among the attributes too (kSecAttrPersistentReference).
            result.attributes = attributes.merging([
                "persistref": .data(PersistentReference(itemClass: item.itemClass, rowID: item.row.rowID).data)
            ]) { old, _ in old }
        }
        if query.returns.contains(.persistentReference) {
            result.persistentReference = PersistentReference(itemClass: item.itemClass, rowID: item.row.rowID).data
        }
        if needsData {
            var data = try openData(item, transaction: transaction)
            if let policy = item.accessControl {
                data = try openForApplicationPassword(data, policy: policy, context: query.authenticationContext)
            }
            if query.returns.contains(.data) { result.data = data }
            if query.returns.contains(.reference) && Self.hasReferences(item.itemClass) {
                result.reference =
                    item.itemClass == .certificate
                    ? .certificate(ItemMaterial(attributes: attributes, data: data))
                    : .key(ItemMaterial(attributes: attributes, data: data))
            }
        }
        if query.itemClass == .identity {
            guard let key = try identityKey(for: item, caller: caller, transaction: transaction) else { return nil }
            if query.returns.contains(.attributes) {
                result.attributes = key.attributes.merging(attributes) { _, certificate in certificate }
                result.attributes?["class"] = .string(ItemClass.identity.rawValue)
            }
            if query.returns.contains(.reference), case .certificate(let certificate) = result.reference {
                try requireAvailable(key)
                if let policy = key.accessControl {
                    switch evaluator.authorize(
                policy, operation: .readData, authenticationUI: query.authenticationUI,
                context: query.authenticationContext)
                    {
                    case .allowed: break
                    case .skip: return nil
                    case .denied(let code): throw KeychainStatus(code, "the key's access control is not satisfied")
                    }
                }
                let keyData = try openData(key, transaction: transaction)
                var keyAttributes = key.attributes
                keyAttributes["class"] = .string(ItemClass.key.rawValue)
                result.reference = .identity(
                    certificate: certificate, privateKey: ItemMaterial(attributes: keyAttributes, data: keyData))
            }
        }
        return result
    }

    private func openData(_ item: ItemSealer.OpenedItem, transaction: StoreTransaction) throws -> SecureBytes {
        guard let sealedValue = try item.row.value ?? transaction.value(rowID: item.row.rowID) else {
            throw KeychainStatus(.itemNotFound, "the item was deleted")
        }
        return try sealer.openData(item, sealedValue: sealedValue)
    }

    /// The private key (in a group the caller sees) whose application label is the certificate's public-key hash.
    private func identityKey(
        for certificate: ItemSealer.OpenedItem, caller: CallerIdentity, transaction: StoreTransaction
    ) throws -> ItemSealer.OpenedItem? {
        guard case .data(let hash) = certificate.attributes["pkhh"], !hash.isEmpty else { return nil }
        for row in try transaction.items(
            itemClass: ItemClass.key.rawValue, accessGroups: caller.visibleGroups, synchronizable: nil)
        {
            let key = try sealer.open(row)
            if key.attributes["kcls"] == .string("1"), key.attributes["klbl"] == .data(hash) { return key }
        }
        return nil
    }

    // MARK: Update

    private func update(_ query: ItemQuery, changes: [String: KeychainValue], caller: CallerIdentity) throws {
        let itemClass = query.itemClass ?? query.persistentReference!.itemClass
        guard itemClass != .identity else {
            throw KeychainStatus(.param, "update the identity's certificate or key item instead")
        }
        let (changedAttributes, newData) = try ItemQuery.parseChanges(changes, for: itemClass)
        if case .string(let group) = changedAttributes["agrp"], !caller.mayAccess(group) {
            throw KeychainStatus(.missingEntitlement, "the caller does not hold access group \(group)")
        }
        var query = query
        query.limit = nil
        let events = try database.write { transaction in
            let matches = try matchingItems(query, caller: caller, transaction: transaction)
            guard !matches.isEmpty else { throw KeychainStatus(.itemNotFound, "no item matches") }
            var events: [EngineEvent] = []
            let now = Date()
            for item in matches {
                try requireAvailable(item)
                if let policy = item.accessControl {
                    let decision = evaluator.authorize(
                        policy, operation: .update, authenticationUI: query.authenticationUI,
                        context: query.authenticationContext)
                    switch decision {
                    case .allowed: break
                    case .denied(let code): throw KeychainStatus(code, "the item's access control is not satisfied")
                    case .skip: throw KeychainStatus(.interactionNotAllowed, "the item's access control is not satisfied")
                    }
                }
                var attributes = item.attributes.merging(changedAttributes) { _, new in new }
                if changedAttributes["pdmn"] != nil && changedAttributes["accc"] == nil && item.accessControl != nil {
                    throw KeychainStatus(.param, "change kSecAttrAccessControl to change the protection class")
                }
                if changedAttributes["accc"] != nil { attributes["pdmn"] = nil }
                let protectionClass = try Self.protectionClass(of: attributes)
                attributes["pdmn"] = .string(protectionClass.rawValue)
                attributes["mdat"] = .date(max(now, Self.date(attributes["cdat"]) ?? now))
                let synchronizable = attributes["sync"]?.boolValue ?? false
                if protectionClass.isThisDeviceOnly && synchronizable {
                    throw KeychainStatus(.param, "a ThisDeviceOnly item cannot be synchronizable")
                }
                let group = attributes["agrp"]?.stringValue ?? item.row.accessGroup
                // The current value is opened (and its application-password layer with the context's password) even
                // when a new value replaces it: Apple's update decrypts the item under its current list first, so a
                // wrong password changes nothing (kAKSKeyOpDecrypt of the old ACL, SecAccessControl.m).
                var data = try openData(item, transaction: transaction)
                if let old = item.accessControl {
                    data = try openForApplicationPassword(data, policy: old, context: query.authenticationContext)
                }
                if let newData { data = SecureBytes(newData) }
                if case .accessControl(var policy) = attributes["accc"] {
                    if changedAttributes["accc"] != nil, AccessRequirement.bindsEnrolledSet(policy), let authentication {
                        policy.boundStateHash = try authentication.currentStateHash() ?? Data()
                        attributes["accc"] = .accessControl(policy)
                    }
                    data = try sealForApplicationPassword(data, policy: policy, context: query.authenticationContext)
                }
                var row = item.row
                row.accessGroup = group
                row.protectionClass = protectionClass.rawValue
                row.synchronizable = synchronizable
                row.blindIndex = sealer.blindIndex(
                    itemClass: item.itemClass, accessGroup: group, synchronizable: synchronizable,
                    attributes: attributes)
                let sealed = try sealer.seal(row, attributes: attributes, data: data, protectionClass: protectionClass)
                try transaction.update(sealed)
                events.append(event(.updated, sealed))
            }
            return events
        }
        hub.emit(events)
    }

    // MARK: Delete

    private func delete(_ query: ItemQuery, caller: CallerIdentity) throws {
        var query = query
        query.limit = nil
        let events = try database.write { transaction in
            var events: [EngineEvent] = []
            var rows: [StoredItem] = []
            for item in try matchingItems(query, caller: caller, transaction: transaction) {
                rows.append(item.row)
                if query.itemClass == .identity,
                    let key = try identityKey(for: item, caller: caller, transaction: transaction)
                {
                    rows.append(key.row)
                }
            }
            guard !rows.isEmpty else { throw KeychainStatus(.itemNotFound, "no item matches") }
            var deleted = Set<Int64>()
            for row in rows where deleted.insert(row.rowID).inserted {
                try transaction.delete(rowID: row.rowID)
                events.append(event(.deleted, row))
            }
            return events
        }
        hub.emit(events)
    }

    // MARK: Matching

    /// The items `query` matches among those `caller` may see, in row order, attributes decrypted.
    private func matchingItems(
        _ query: ItemQuery, caller: CallerIdentity, transaction: StoreTransaction, includingValues: Bool = false,
        mayLeaveAttributesSealed: Bool = false
    ) throws -> [ItemSealer.OpenedItem] {
        var groups = caller.visibleGroups
        if let group = query.accessGroup {
            guard caller.mayAccess(group) else {
                throw KeychainStatus(.missingEntitlement, "the caller does not hold access group \(group)")
            }
            groups = [group]
        }
        let storedClass = query.itemClass == .identity ? ItemClass.certificate : query.itemClass
        var candidates: [StoredItem]
        var usedScan = false
        if let reference = query.persistentReference {
            guard storedClass == nil || storedClass == reference.itemClass,
                let row = try transaction.item(rowID: reference.rowID), row.itemClass == reference.itemClass.rawValue,
                groups?.contains(row.accessGroup) ?? true
            else { return [] }
            candidates = [row]
        } else if let storedClass, let groups, !query.caseInsensitive, query.itemClass != .identity,
            AttributeSchema.primaryKey(of: storedClass).allSatisfy({ query.attributes[$0] != nil })
        {
            let syncValues: [Bool] =
                switch query.synchronizable {
                case .no: [false]
                case .yes: [true]
                case .any: [false, true]
                }
            var indexes: [Data] = []
            for group in groups {
                for sync in syncValues {
                    indexes.append(
                        sealer.blindIndex(
                            itemClass: storedClass, accessGroup: group, synchronizable: sync,
                            attributes: query.attributes))
                }
            }
            candidates = try transaction.items(blindIndexes: indexes, includingValues: includingValues)
                .sorted { $0.rowID < $1.rowID }
        } else {
            let sync: Bool? =
                switch query.synchronizable {
                case .no: false
                case .yes: true
                case .any: nil
                }
            candidates = try transaction.items(
                itemClass: storedClass!.rawValue, accessGroups: groups, synchronizable: sync)
            usedScan = true
        }
        // A lookup by the full primary key that returns nothing but data or persistent references needs no
        // attribute: the blind index already matched every filter, and the clear (authenticated) access-control
        // flag says whether an access-control check is due.
        let primaryKey = storedClass.map { Set(AttributeSchema.primaryKey(of: $0)) } ?? []
        let attributesNeeded =
            !mayLeaveAttributesSealed || usedScan || query.caseInsensitive || query.itemClass == .identity
            || query.persistentReference != nil || !query.returns.isSubset(of: [.data, .persistentReference])
            || !query.attributes.keys.allSatisfy(primaryKey.contains)
        var matches: [ItemSealer.OpenedItem] = []
        for row in candidates {
            if !attributesNeeded && row.hasAccessControl == false {
                matches.append(try sealer.unopened(row))
                continue
            }
            // A persistent reference names one item whatever its kSecAttrSynchronizable, unless the query says.
            if query.persistentReference != nil && query.synchronizableWasGiven && query.synchronizable != .any
                && row.synchronizable != (query.synchronizable == .yes)
            {
                continue
            }
            let item = try sealer.open(row)
            if Self.matches(item.attributes, query.attributes, caseInsensitive: query.caseInsensitive) {
                matches.append(item)
            }
        }
        return matches
    }

    private static func matches(
        _ attributes: [String: KeychainValue], _ filters: [String: KeychainValue], caseInsensitive: Bool
    ) -> Bool {
        for (key, wanted) in filters {
            guard let value = attributes[key] else { return false }
            if AttributeSchema.matches(value, wanted) { continue }
            if caseInsensitive, case .string(let a) = value, case .string(let b) = wanted,
                a.compare(b, options: [.caseInsensitive]) == .orderedSame
            {
                continue
            }
            return false
        }
        return true
    }

    // MARK: Rules

    /// Seals `data` under the context's application password when `policy` has `.applicationPassword`.
    private func sealForApplicationPassword(
        _ data: SecureBytes, policy: AccessControlPolicy, context: AuthenticationContextID?
    ) throws -> SecureBytes {
        guard AccessRequirement.needsApplicationPassword(policy) else { return data }
        return try ApplicationPasswordSeal.seal(data, password: applicationPassword(context))
    }

    /// Opens the application-password layer of an item whose `policy` has `.applicationPassword`.
    private func openForApplicationPassword(
        _ data: SecureBytes, policy: AccessControlPolicy, context: AuthenticationContextID?
    ) throws -> SecureBytes {
        guard AccessRequirement.needsApplicationPassword(policy) else { return data }
        return try ApplicationPasswordSeal.open(data, password: applicationPassword(context))
    }

    func applicationPassword(_ context: AuthenticationContextID?) throws -> SecureBytes {
        guard let authentication, let context else {
            throw KeychainStatus(.interactionNotAllowed, "the item needs an application password from an LAContext")
        }
        do {
            guard let password = try authentication.applicationPassword(for: context) else {
                throw KeychainStatus(.authFailed, "the LAContext has no application password set")
            }
            return password
        } catch let error as AuthenticationError {
            throw KeychainStatus(KeychainStatus.Code(authenticationCode: error.code), "the LAContext is not usable")
        }
    }

    /// Makes the keybag's "a passcode is set" follow the real state before an `akpu` item is added: a passcode
    /// verified through PAM already set it; otherwise the PAM service is asked whether the user's account can
    /// authenticate (`pam_acct_mgmt`, nothing typed). Without a passcode the add fails as Apple's does.
    private func notePasscodeIfSet() throws {
        guard !enclave.isPasscodeSet, let authentication else { return }
        let user = authentication.configuration.username
        let isSet = (try? BlockingBridge.wait { try await authentication.passcode.isPasscodeSet(user: user) }) ?? false
        if isSet { try enclave.setPasscodeSet(true) }
    }

    private func requireAvailable(_ item: ItemSealer.OpenedItem) throws {
        guard enclave.isAvailable(item.protectionClass) else {
            throw KeychainStatus(.interactionNotAllowed, "the item's protection class is locked")
        }
    }

    /// The protection class from `kSecAttrAccessControl` or `kSecAttrAccessible` (they must agree); `ak` when
    /// neither is given.
    static func protectionClass(of attributes: [String: KeychainValue]) throws -> ProtectionClass {
        var name = attributes["pdmn"]?.stringValue
        if case .accessControl(let policy) = attributes["accc"] {
            guard ProtectionClass(rawValue: policy.protection) != nil else {
                throw KeychainStatus(.param, "the access control names an unknown protection class")
            }
            if let name, name != policy.protection {
                throw KeychainStatus(.param, "kSecAttrAccessible disagrees with kSecAttrAccessControl")
            }
            name = policy.protection
        }
        guard let protectionClass = ProtectionClass(rawValue: name ?? "ak") else {
            throw KeychainStatus(.param, "kSecAttrAccessible has an unknown value")
        }
        return protectionClass
    }

    /// `kSecAttrTokenIDSecureEnclave`.
    static let secureEnclaveToken = "com.apple.setoken"

    private static func hasReferences(_ itemClass: ItemClass) -> Bool {
        itemClass == .certificate || itemClass == .key || itemClass == .identity
    }

    /// Whether answering `returns` for an item of `itemClass` needs its data: for the data, or for a reference
    /// (built from the data) of a class that has references.
    private static func needsData(_ returns: ReturnOptions, _ itemClass: ItemClass) -> Bool {
        returns.contains(.data) || (returns.contains(.reference) && hasReferences(itemClass))
    }

    private static func date(_ value: KeychainValue?) -> Date? {
        if case .date(let date) = value { return date }
        return nil
    }

    func event(_ kind: EngineEvent.Kind, _ row: StoredItem) -> EngineEvent {
        let itemClass = ItemClass(rawValue: row.itemClass)
        return EngineEvent(
            kind: kind, itemClass: itemClass, accessGroup: row.accessGroup,
            persistentReference: itemClass.map { PersistentReference(itemClass: $0, rowID: row.rowID).data })
    }

    /// Maps any failure onto the `OSStatus` Keychain Services reports; messages never carry item contents.
    static func status(_ error: any Error) -> KeychainStatus {
        switch error {
        case let status as KeychainStatus: return status
        case StoreError.Code.duplicate: return KeychainStatus(.duplicateItem, "an item with this primary key exists")
        case StoreError.Code.corrupt: return KeychainStatus(.decode, "the keychain database is damaged")
        case StoreError.Code.diskFull: return KeychainStatus(.diskFull, "the disk is full")
        case StoreError.Code.io: return KeychainStatus(.io, "the keychain database cannot be read or written")
        case EnclaveError.Code.locked: return KeychainStatus(.interactionNotAllowed, "the keychain is locked")
        case EnclaveError.Code.passcodeNotSet:
            return KeychainStatus(.authFailed, "this protection class needs a passcode and none is set")
        case EnclaveError.Code.corrupt: return KeychainStatus(.decode, "a key does not authenticate")
        case EnclaveError.Code.wrongPassword:
            return KeychainStatus(.authFailed, "the application password does not open the key")
        case EnclaveError.Code.io: return KeychainStatus(.io, "the key files cannot be read or written")
        case CryptoError.Code.authenticationFailure: return KeychainStatus(.decode, "a ciphertext does not authenticate")
        default: return KeychainStatus(.internalComponent, "internal failure")
        }
    }
}
