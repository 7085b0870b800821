import Enclave
import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol

extension KeychainEngine {
    /// Serves one enclave-key request for `caller`: every private-key operation on a key with an access-control
    /// list first asks the evaluator (with the caller's authentication context), and only then opens the key.
    ///
    /// - Throws: `KeychainStatus`: the evaluator's code when the list is not satisfied (usually
    ///   `errSecInteractionNotAllowed` or `errSecAuthFailed`), `errSecInteractionNotAllowed` when the list's
    ///   protection class is locked, `errSecDecode` when the key does not open (changed bytes, another device),
    ///   `errSecInvalidKeyRef` for a handle that is not an enclave key, `errSecParam` for bad input (a ciphertext
    ///   that does not open, a peer key that is not on P-256, an attestation challenge the TPM does not open),
    ///   `errSecUnimplemented` for attestation on the software backend, and what `SecItemAdd` returns for a stored
    ///   key.
    ///
    /// Blocks the calling thread while the user is asked through `prompting`, as ``handle(_:caller:prompting:)``
    /// for keychain requests does.
    package func handle(
        _ request: KeyRequest, caller: CallerIdentity, prompting: Prompting = .none
    ) throws -> KeyResponse {
        do {
            try requireOwnContext(request.context, caller: caller)
            switch request {
            case .generate(var policy, let item, let context):
                if let unbound = policy {
                    guard ProtectionClass(rawValue: unbound.protection) != nil else {
                        throw KeychainStatus(.param, "the access control names an unknown protection class")
                    }
                    if AccessRequirement.bindsEnrolledSet(unbound), let authentication {
                        // Bound into the sealed key: after any enrollment change the key never signs again.
                        policy?.boundStateHash = try authentication.currentStateHash() ?? Data()
                    }
                }
                // An application password is part of the key: derived into its sealing key, not checked beside it.
                let password = try policy.flatMap {
                    AccessRequirement.needsApplicationPassword($0) ? try applicationPassword(context) : nil
                }
                let key = try enclave.generateKey(accessControl: Self.encodedAccessControl(policy), password: password)
                if var item {
                    item[ItemKey.valueData] = .data(key.serialized)
                    if item["klbl"] == nil { item["klbl"] = .data(InsecureSHA1.hash(key.publicKey)) }
                    if let policy { item[ItemKey.accessControl] = .accessControl(policy) }
                    _ = try handle(.add(item), caller: caller, prompting: prompting)
                }
                return .generated(handle: key.serialized, publicKey: key.publicKey)
            case .sign(let handle, let digest, let context):
                return .signature(
                    try useEnclaveKey(handle, for: .useKeySign, context: context, prompting: prompting) {
                        try $0.signature(forDigest: digest).derRepresentation
                    })
            case .decrypt(let handle, let ciphertext, let variant, let context):
                return .secret(
                    try useEnclaveKey(handle, for: .useKeyDecrypt, context: context, prompting: prompting) {
                        try ECIES.open(ciphertext, with: $0, variant: variant)
                    })
            case .keyExchange(let handle, let peerBytes, let kdf, let context):
                let peer: P256.PublicKey
                do {
                    peer = try P256.PublicKey(x963Representation: peerBytes)
                } catch {
                    throw KeychainStatus(.param, "the peer key is not a P-256 public key")
                }
                // Checked before the key is used (and its access control asked): a request may not make the daemon
                // derive (and allocate) more than the KDF's limit.
                if let kdf, !(1...X963KDF.maximumOutputByteCount).contains(kdf.byteCount) {
                    throw KeychainStatus(
                        .param, "the requested size must be 1 to \(X963KDF.maximumOutputByteCount) bytes")
                }
                return .secret(
                    try useEnclaveKey(
                        handle, for: .useKeyKeyExchange, context: context, prompting: prompting
                    ) { key in
                        guard let kdf else { return try key.sharedSecret(with: peer) }
                        return try key.sharedSecret(
                            with: peer, x963SharedInfo: kdf.sharedInfo, outputByteCount: kdf.byteCount,
                            digest: kdf.digest)
                    })
            case .attestationIdentity:
                let identity = try enclave.attestationIdentity()
                return .attestationIdentity(
                    certificate: identity.certificate, endorsementKey: identity.endorsementKey,
                    attestationKey: identity.attestationKey)
            case .attest(let handle, let credentialBlob, let encryptedSecret, let context):
                // No list check: attesting runs no private-key operation and tells nothing secret. The key's
                // authorization value (and its application password) is still needed to certify it.
                let key = try Self.enclaveKey(handle)
                let password = key.passwordKDF.isEmpty ? nil : try applicationPassword(context)
                let (keyPublicArea, certification) = try enclave.attest(
                    key, password: password, credentialBlob: credentialBlob, encryptedSecret: encryptedSecret)
                return .attestation(
                    keyPublicArea: keyPublicArea, statement: certification.attestation,
                    signature: certification.signatureR + certification.signatureS)
            }
        } catch {
            throw Self.status(error)
        }
    }

    /// The bytes an enclave key binds as its access-control list: the attribute codec's encoding of `accc`, so
    /// the list is bound exactly as the keychain stores it; empty for a key without one.
    static func encodedAccessControl(_ policy: AccessControlPolicy?) -> Data {
        guard let policy else { return Data() }
        return AttributeCodec.encode([ItemKey.accessControl: .accessControl(policy)])
    }

    /// Checks the key's list for `operation`, then runs `body` with the opened key. Failures of `body` (bad
    /// ciphertext, KDF size) are the caller's input: `errSecParam`.
    private func useEnclaveKey<Result>(
        _ handle: Data, for operation: AccessControlOperation, context: AuthenticationContextID?,
        prompting: Prompting, _ body: (any P256PrivateKeyOperations) throws -> Result
    ) throws -> Result {
        let key = try Self.enclaveKey(handle)
        if !key.accessControl.isEmpty {
            guard
                case .accessControl(let policy)? = try? AttributeCodec.decode(key.accessControl)[ItemKey.accessControl]
            else {
                throw KeychainStatus(.decode, "the key's access control does not decode")
            }
            if let protectionClass = ProtectionClass(rawValue: policy.protection),
                !enclave.isAvailable(protectionClass)
            {
                throw KeychainStatus(.interactionNotAllowed, "the key's protection class is locked")
            }
            if AccessRequirement.needsApplicationPassword(policy) && key.passwordKDF.isEmpty {
                // A key made before the password was part of keys: nothing ever checked which password it was
                // given, so no password can be trusted to open it now. It fails closed; make it again.
                throw KeychainStatus(.authFailed, "the key predates application-password binding; create it again")
            }
            let decision = evaluator.authorize(
                policy, operation: operation, authenticationUI: .allow, context: context, prompting: prompting)
            switch decision {
            case .allowed: break
            case .skip: throw KeychainStatus(.interactionNotAllowed, "the key's access control is not satisfied")
            case .denied(let code): throw KeychainStatus(code, "the key's access control is not satisfied")
            }
        }
        let password = key.passwordKDF.isEmpty ? nil : try applicationPassword(context)
        return try enclave.withPrivateKey(key, password: password) { opened in
            do {
                return try body(opened)
            } catch let error as CryptoError {
                throw KeychainStatus(.param, "the operation's input was refused: \(error.code)")
            }
        }
    }
}

extension KeychainEngine {
    /// A client's key handle. - Throws: `errSecInvalidKeyRef` when it is not an enclave key.
    static func enclaveKey(_ handle: Data) throws -> EnclaveKey {
        do {
            return try EnclaveKey(serialized: handle)
        } catch {
            throw KeychainStatus(KeychainStatus.Code(rawValue: -67712), "the key is not an enclave key")
        }
    }
}

extension KeyRequest {
    /// The authentication context the request names.
    var context: AuthenticationContextID? {
        switch self {
        case .generate(_, _, let context), .sign(_, _, let context), .decrypt(_, _, _, let context),
            .keyExchange(_, _, _, let context), .attest(_, _, _, let context):
            return context
        case .attestationIdentity:
            return nil
        }
    }
}
