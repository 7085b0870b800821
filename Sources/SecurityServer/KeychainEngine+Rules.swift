import Authenticators
import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol
import WorkThreads

/// Rules shared by the operations: application passwords, protection classes, availability, events.
extension KeychainEngine {
    /// Seals `data` under the context's application password when `policy` has `.applicationPassword`.
    func sealForApplicationPassword(
        _ data: SecureBytes, policy: AccessControlPolicy, context: AuthenticationContextID?
    ) throws -> SecureBytes {
        guard AccessRequirement.needsApplicationPassword(policy) else { return data }
        return try ApplicationPasswordSeal.seal(data, password: applicationPassword(context))
    }

    /// Opens the application-password layer of an item whose `policy` has `.applicationPassword`.
    func openForApplicationPassword(
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
    func notePasscodeIfSet() throws {
        guard !enclave.isPasscodeSet, let authentication else { return }
        let user = authentication.configuration.username
        let isSet = (try? BlockingBridge.wait { try await authentication.passcode.isPasscodeSet(user: user) }) ?? false
        if isSet { try enclave.setPasscodeSet(true) }
    }

    func requireAvailable(_ item: ItemSealer.OpenedItem) throws {
        try requireAvailable(item.protectionClass)
    }

    func requireAvailable(_ protectionClass: ProtectionClass) throws {
        guard enclave.isAvailable(protectionClass) else {
            throw KeychainStatus(.interactionNotAllowed, "the item's protection class is locked")
        }
    }

    /// The protection class from `kSecAttrAccessControl` or `kSecAttrAccessible` (they must agree); `ak` when
    /// neither is given.
    static func protectionClass(of attributes: [String: KeychainValue]) throws -> ProtectionClass {
        var name = attributes[ItemKey.accessible]?.stringValue
        if case .accessControl(let policy) = attributes[ItemKey.accessControl] {
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

    static func hasReferences(_ itemClass: ItemClass) -> Bool {
        itemClass == .certificate || itemClass == .key || itemClass == .identity
    }

    /// Whether answering `returns` for an item of `itemClass` needs its data: for the data, or for a reference
    /// (built from the data) of a class that has references.
    static func needsData(_ returns: ReturnOptions, _ itemClass: ItemClass) -> Bool {
        returns.contains(.data) || (returns.contains(.reference) && hasReferences(itemClass))
    }

    static func date(_ value: KeychainValue?) -> Date? {
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
}
