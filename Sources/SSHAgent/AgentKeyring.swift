import Foundation
import SSHAgentProtocol
import KeychainServices
import LocalAuthentication

/// The agent's keys: each an `LAPersistedRight` saved in `LARightStore` under `ssh-key.<name>`, so its P-256 key is
/// held by the enclave under the right's requirement and signs only while the right is authorized.
public struct AgentKeyring: Sendable {
    /// The prefix of the rights' identifiers.
    static let identifierPrefix = "ssh-key."

    /// A key's name, public key and requirement.
    public struct Key: Sendable {
        public var name: String
        public var publicKey: Data
        public var requirement: String

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

    public init() {}

    /// Makes a key called `name` (letters, digits, `-`, `_`, `.`) under `requirement`.
    ///
    /// - Throws: `errSecDuplicateItem` when the name is taken, `errSecParam` for a bad name.
    public func create(_ name: String, requirement: Requirement) async throws -> Key {
        guard Self.isValidName(name) else {
            throw NSError(domain: NSOSStatusErrorDomain, code: Int(errSecParam), userInfo: [
                NSLocalizedDescriptionKey: "a key name is 1 to 64 letters, digits, '-', '_' or '.'",
            ])
        }
        let right = try await LARightStore.shared.saveRight(
            LARight(requirement: requirement.laRequirement), identifier: Self.identifierPrefix + name)
        return Key(name: name, publicKey: try await right.key.publicKey.bytes, requirement: requirement.rawValue)
    }

    /// Every key, by name.
    public func keys() async throws -> [Key] {
        var keys: [Key] = []
        for identifier in try LARightStore.shared.identifiers().sorted() where identifier.hasPrefix(Self.identifierPrefix) {
            let name = String(identifier.dropFirst(Self.identifierPrefix.count))
            let right = try await LARightStore.shared.right(forIdentifier: identifier)
            keys.append(Key(
                name: name, publicKey: try await right.key.publicKey.bytes,
                requirement: (try? LARightStore.shared.requirementName(forIdentifier: identifier)) ?? "?"))
        }
        return keys
    }

    /// The key called `name`. - Throws: `errSecItemNotFound`.
    public func key(_ name: String) async throws -> Key {
        guard let key = try await keys().first(where: { $0.name == name }) else {
            throw NSError(domain: NSOSStatusErrorDomain, code: Int(errSecItemNotFound), userInfo: [
                NSLocalizedDescriptionKey: "no SSH key is called \(name)",
            ])
        }
        return key
    }

    /// Removes the key called `name` with its right. - Throws: `errSecItemNotFound`.
    public func remove(_ name: String) async throws {
        try await LARightStore.shared.removeRight(forIdentifier: Self.identifierPrefix + name)
    }

    /// Signs `data` with the key called `name` after authorizing its right with `reason` through `presenter`;
    /// the right is deauthorized again at once, so each signature needs its own authentication.
    func sign(_ data: Data, with name: String, reason: String, presenter: (any AuthenticationPresenter)?) async throws
        -> [UInt8]
    {
        let right = try await LARightStore.shared.right(forIdentifier: Self.identifierPrefix + name)
        right.presenter = presenter
        try await right.authorize(localizedReason: reason)
        defer { Task { await right.deauthorize() } }
        let der = try await right.key.sign(data, algorithm: .ecdsaSignatureMessageX962SHA256)
        return try SSHKey.signature(der: der)
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0)) }
    }
}
