import Foundation
import KeychainServices
import SecurityClient

/// A right kept in ``LARightStore``, with its own enclave P-256 key and secret (`LAPersistedRight`).
///
/// Obtained only from ``LARightStore``. The key and the secret are protected by the right's requirement; their
/// private operations and the secret's data are available only while the right is authorized, with the right's
/// authorized context as the credential.
///
/// Differs from Apple: a `.biometryCurrentSet` right compares the enrolled-fingerprint hash recorded when it was
/// saved with the current one before each authorization; after any change it fails with
/// `LAError.Code.authenticationFailed` saying the right was invalidated, and stays so.
public final class LAPersistedRight: LARight, @unchecked Sendable {
    // Safe to share: every stored property is immutable after init; LARight guards its own state.
    package let identifier: String
    package let record: RightRecord

    /// The right's managed private key.
    public let key: LAPrivateKey

    /// The right's secret (empty when the right was saved without one).
    public let secret: LASecret

    package init(identifier: String, record: RightRecord, publicKey: SecKey) {
        self.identifier = identifier
        self.record = record
        let requirement = LAAuthenticationRequirement(kind: record.kind)
        let weakRight = WeakRight()
        key = LAPrivateKey(tag: record.keyTag, publicKey: LAPublicKey(publicKey), right: weakRight)
        secret = LASecret(identifier: identifier, hasData: record.hasSecret, right: weakRight)
        super.init(requirement: requirement)
        weakRight.right = self
    }

    package override func checkStillValid() async throws {
        guard let recorded = record.enrolledSetHash else { return }
        if try await Self.enrolledSetHash(client) != recorded {
            throw LAError(
                .authenticationFailed,
                "the right was invalidated: the enrolled fingerprints changed since it was saved")
        }
    }
}

extension LARight {
    /// The enrolled-fingerprint hash now (nil with no enrolled finger), asked of `client`'s engine.
    static func enrolledSetHash(_ client: (any SecurityClient)?) async throws -> Data? {
        guard let client else { throw LAError(.invalidContext, "the authentication service cannot be opened") }
        guard case .biometryState(_, let hash) = try await client.send(.biometryState) else {
            throw LAError(.invalidContext, "unexpected answer from the authentication service")
        }
        return hash
    }
}

/// What the store keeps about a right (not its key or secret).
package struct RightRecord: Codable, Sendable {
    package var kind: LAAuthenticationRequirement.Kind
    package var keyTag: Data
    package var hasSecret: Bool
    /// For `.biometryCurrentSet`: the enrolled-fingerprint hash when the right was saved.
    package var enrolledSetHash: Data?
}

/// A weak link from a right's key and secret back to the right (they are owned by it).
package final class WeakRight: @unchecked Sendable {
    // Safe to share: `right` is set once, in LAPersistedRight.init, before the object is shared.
    package weak var right: LAPersistedRight?

    /// The right's authorized context, or an error saying the right is not authorized.
    func authorizedContext() throws -> (LAPersistedRight, LAContext) {
        guard let right, let context = right.authorizedContext else {
            throw LAError(.authenticationFailed, "the right is not authorized; call authorize(localizedReason:) first")
        }
        return (right, context)
    }
}

/// Runs a Security-style call that reports a CFError and returns nil on failure.
func throwingSecurityError<T>(_ body: (UnsafeMutablePointer<Unmanaged<CFError>?>) -> T?) throws -> T {
    var error: Unmanaged<CFError>?
    guard let value = body(&error) else {
        throw error?.takeRetainedValue() ?? LAError(.authenticationFailed, "the key operation failed")
    }
    return value
}
