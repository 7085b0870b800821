import Foundation
public import KeyAttestation
import KeychainServices
import SecurityProtocol

/// A persisted right's enclave P-256 private key (`LAPrivateKey`).
///
/// The key never leaves the engine's enclave. Its private operations run only while the right is authorized,
/// with the right's authorized context as the credential; otherwise they throw ``LAError`` `authenticationFailed`
/// saying the right is not authorized.
public final class LAPrivateKey: NSObject, Sendable {
    private let tag: Data
    private let right: WeakRight

    /// The key's public half; its operations need no authorization.
    public let publicKey: LAPublicKey

    init(tag: Data, publicKey: LAPublicKey, right: WeakRight) {
        self.tag = tag
        self.publicKey = publicKey
        self.right = right
        super.init()
    }

    /// Signs `data` (ECDSA; see `SecKeyCreateSignature`).
    public func sign(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        try await withAuthorizedKey { SecKeyCreateSignature($0, algorithm, data as NSData, $1) }
    }

    /// Calls `completion` (on another thread) with ``sign(_:algorithm:)``'s outcome.
    public func sign(
        _ data: Data, algorithm: SecKeyAlgorithm, completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        Self.deliver(to: completion) { try await self.sign(data, algorithm: algorithm) }
    }

    /// Whether ``sign(_:algorithm:)`` supports `algorithm`.
    public func canSign(using algorithm: SecKeyAlgorithm) -> Bool { supports(.sign, algorithm) }

    /// Decrypts an Apple ECIES ciphertext made for ``publicKey``.
    public func decrypt(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        try await withAuthorizedKey { SecKeyCreateDecryptedData($0, algorithm, data as NSData, $1) }
    }

    /// Calls `completion` (on another thread) with ``decrypt(_:algorithm:)``'s outcome.
    public func decrypt(
        _ data: Data, algorithm: SecKeyAlgorithm, completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        Self.deliver(to: completion) { try await self.decrypt(data, algorithm: algorithm) }
    }

    /// What `operation` makes with the key while the right is authorized (a `SecKey` function's result, its error
    /// thrown as `SecKey` functions report theirs).
    private func withAuthorizedKey(
        _ operation: @escaping @Sendable (SecKey, UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData?
    ) async throws -> Data {
        try await keychainWork {
            let key = try self.authorizedKey()
            return try throwingSecurityError { operation(key, $0) } as Data
        }
    }

    /// Runs `operation` in a task of its own and hands its outcome to `completion`, as Apple's completion-handler
    /// variants do.
    private static func deliver(
        to completion: @escaping @Sendable (Data?, (any Error)?) -> Void,
        _ operation: @escaping @Sendable () async throws -> Data
    ) {
        Task.detached {
            do { completion(try await operation(), nil) } catch { completion(nil, error) }
        }
    }

    /// Whether ``decrypt(_:algorithm:)`` supports `algorithm`.
    public func canDecrypt(using algorithm: SecKeyAlgorithm) -> Bool { supports(.decrypt, algorithm) }

    /// ECDH with the peer's X9.63 public key `publicKey` (see `SecKeyCopyKeyExchangeResult` for `parameters`).
    public func exchangeKeys(publicKey: Data, algorithm: SecKeyAlgorithm, parameters: [AnyHashable: Any])
        async throws -> Data
    {
        nonisolated(unsafe) let dictionary = NSDictionary(dictionary: parameters)  // A copy, never mutated.
        return try await keychainWork {
            let key = try self.authorizedKey()
            let peer = try throwingSecurityError {
                SecKeyCreateWithData(
                    publicKey as NSData,
                    [
                        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                        kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
                    ]
                        as NSDictionary, $0)
            }
            return try throwingSecurityError { SecKeyCopyKeyExchangeResult(key, algorithm, peer, dictionary, $0) }
                as Data
        }
    }

    /// Calls `completion` (on another thread) with ``exchangeKeys(publicKey:algorithm:parameters:)``'s outcome.
    public func exchangeKeys(
        publicKey: Data, algorithm: SecKeyAlgorithm, parameters: [AnyHashable: Any],
        completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        let dictionary = NSDictionary(dictionary: parameters)
        nonisolated(unsafe) let sendable = dictionary  // NSDictionary copied above, never mutated.
        Self.deliver(to: completion) {
            let parameters = sendable as? [AnyHashable: Any] ?? [:]
            return try await self.exchangeKeys(publicKey: publicKey, algorithm: algorithm, parameters: parameters)
        }
    }

    /// Whether ``exchangeKeys(publicKey:algorithm:parameters:)`` supports `algorithm`.
    public func canExchangeKeys(using algorithm: SecKeyAlgorithm) -> Bool { supports(.keyExchange, algorithm) }

    // MARK: Key attestation (our addition)

    /// The identity of the TPM that holds this key, for a verifier's challenge (see the `KeyAttestation` module).
    /// Needs no authorization.
    ///
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain`: `errSecUnimplemented` (-4) on the software enclave backend.
    public func tpmIdentity() async throws -> TPMIdentity {
        try await keychainWork {
            let identity = try Self.securityError { try self.lookUpKey(context: nil).attestationIdentity() }
            return TPMIdentity(
                endorsementCertificate: identity.certificate, endorsementKey: identity.endorsementKey,
                attestationKey: identity.attestationKey)
        }
    }

    /// The TPM's answer to a verifier's challenge for this key. Needs no authorization: the right need not be
    /// authorized, and nothing is signed with the key.
    ///
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain`: `errSecUnimplemented` when no TPM holds the key,
    ///   `errSecParam` when the TPM does not open the challenge.
    public func tpmAttestation(answering challenge: TPMAttestationChallenge) async throws -> TPMKeyAttestation {
        try await keychainWork {
            let answer = try Self.securityError {
                try self.lookUpKey(context: nil).attestation(
                    credentialBlob: challenge.credentialBlob, encryptedSecret: challenge.encryptedSecret)
            }
            return TPMKeyAttestation(
                keyPublicArea: answer.keyPublicArea, statement: answer.statement, signature: answer.signature)
        }
    }

    /// Runs `body`, reporting a `KeychainStatus` as `SecKey` functions report theirs.
    private static func securityError<Value>(_ body: () throws -> Value) throws -> Value {
        do {
            return try body()
        } catch let status as KeychainStatus {
            throw NSError(
                domain: NSOSStatusErrorDomain, code: Int(status.code.rawValue),
                userInfo: [NSLocalizedDescriptionKey: status.message])
        }
    }

    // MARK: Internals

    private func supports(_ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> Bool {
        guard let key = try? lookUpKey(context: nil) else { return false }
        return SecKeyIsAlgorithmSupported(key, operation, algorithm)
    }

    private func authorizedKey() throws -> SecKey {
        let (_, context) = try right.authorizedContext()
        return try lookUpKey(context: context)
    }

    private func lookUpKey(context: LAContext?) throws -> SecKey {
        guard let right = right.right else { throw LAError(.invalidContext, "the right was released") }
        var query: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag, kSecReturnRef as String: true,
        ]
        if let context { query[kSecUseAuthenticationContext as String] = context }
        var result: CFTypeRef?
        let status = KeychainClientSelection.$current.withValue(right.client) {
            SecItemCopyMatching(query as NSDictionary, &result)
        }
        guard status == errSecSuccess, let key = result as? SecKey else {
            throw LAError(.invalidContext, "the right's key is missing (status \(status))")
        }
        return key
    }
}
