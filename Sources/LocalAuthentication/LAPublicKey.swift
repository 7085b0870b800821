import Foundation
import KeychainServices

/// The public half of a persisted right's key (`LAPublicKey`). Its operations are always allowed.
public final class LAPublicKey: NSObject, Sendable {
    private let key: SecKey

    init(_ key: SecKey) {
        self.key = key
        super.init()
    }

    /// The key in ANSI X9.63 form (`04 || X || Y`, 65 bytes).
    public var bytes: Data {
        get async throws {
            let key = self.key
            return try throwingSecurityError { SecKeyCopyExternalRepresentation(key, $0) } as Data
        }
    }

    /// Calls `completion` (on another thread) with ``bytes`` or the error.
    public func exportBytes(completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        Task.detached {
            do { completion(try await self.bytes, nil) } catch { completion(nil, error) }
        }
    }

    /// Encrypts `data` to this key (Apple's ECIES; see `SecKeyCreateEncryptedData`).
    public func encrypt(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        try throwingSecurityError { SecKeyCreateEncryptedData(key, algorithm, data as NSData, $0) } as Data
    }

    /// Calls `completion` (on another thread) with ``encrypt(_:algorithm:)``'s outcome.
    public func encrypt(
        _ data: Data, algorithm: SecKeyAlgorithm, completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        Task.detached {
            do { completion(try await self.encrypt(data, algorithm: algorithm), nil) } catch { completion(nil, error) }
        }
    }

    /// Whether ``encrypt(_:algorithm:)`` supports `algorithm`.
    public func canEncrypt(using algorithm: SecKeyAlgorithm) -> Bool {
        SecKeyIsAlgorithmSupported(key, .encrypt, algorithm)
    }

    /// Verifies `signature` over `signedData`. - Throws: the `errSecVerifyFailed` error when it does not verify.
    public func verify(_ signedData: Data, signature: Data, algorithm: SecKeyAlgorithm) async throws {
        var error: Unmanaged<CFError>?
        guard SecKeyVerifySignature(key, algorithm, signedData as NSData, signature as NSData, &error) else {
            throw error?.takeRetainedValue() ?? LAError(.authenticationFailed, "the signature does not verify")
        }
    }

    /// Calls `completion` (on another thread) with nil when ``verify(_:signature:algorithm:)`` succeeds.
    public func verify(
        _ signedData: Data, signature: Data, algorithm: SecKeyAlgorithm,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        Task.detached {
            do {
                try await self.verify(signedData, signature: signature, algorithm: algorithm)
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// Whether ``verify(_:signature:algorithm:)`` supports `algorithm`.
    public func canVerify(using algorithm: SecKeyAlgorithm) -> Bool {
        SecKeyIsAlgorithmSupported(key, .verify, algorithm)
    }
}
