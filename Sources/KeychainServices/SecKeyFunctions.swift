import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol

/// Creates a P-256 key pair and returns its private key.
///
/// - Parameters:
///   - parameters: `kSecAttrKeyType` (`kSecAttrKeyTypeECSECPrimeRandom`), `kSecAttrKeySizeInBits` (256),
///     optionally `kSecAttrTokenID` = `kSecAttrTokenIDSecureEnclave`, `kSecPrivateKeyAttrs` / `kSecPublicKeyAttrs`
///     (`kSecAttrIsPermanent`, `kSecAttrApplicationTag`, `kSecAttrLabel`, `kSecAttrAccessControl`), common
///     attributes (`kSecAttrAccessGroup`, …) and `kSecUseAuthenticationContext`.
///   - error: receives an `NSOSStatusErrorDomain` error on failure.
/// - Returns: the private key, or nil: `errSecParam` for another key type or size or a malformed dictionary,
///   `errSecDuplicateItem` when a permanent key with the same attributes exists, what `SecItemAdd` returns when
///   storing fails.
///
/// With `kSecAttrTokenIDSecureEnclave` the key is generated in the engine's enclave, sealed under the device root
/// key with its access control bound to it, and never leaves it; private-key operations then run in the engine,
/// which checks the access control (with the context given here) each time. Without it the key is an ordinary
/// software key. `kSecAttrIsPermanent` stores the key as a `kSecClassKey` item. (Apple's Secure Enclave is a separate
/// processor; here the enclave is the engine's process and the root key file.)
@discardableResult
public func SecKeyCreateRandomKey(
    _ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    reportingError(error) { try SecKeyGeneration(parameters).generate() }
}

/// A key's public key.
///
/// - Returns: the public key of a private key, the key itself for a public key, nil for a key that is not P-256.
@discardableResult
public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    guard let publicKey = key.publicKey else { return nil }
    if case .publicKey = key.material { return key }
    var attributes = key.storedAttributes
    for name in ["perm", "accc", "pdmn", "u_AuthCtx"] { attributes[name] = nil }
    return SecKey(material: .publicKey(publicKey), attributes: attributes)
}

/// A key's bytes in ANSI X9.63 form: `04 || X || Y` (65 bytes) for a public key, `04 || X || Y || D` (97 bytes)
/// for a software private key.
///
/// - Returns: nil with `errSecUnimplemented` for an enclave private key (it never leaves the enclave), or for a key
///   that is not P-256.
@discardableResult
public func SecKeyCopyExternalRepresentation(
    _ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    reportingError(error) {
        switch key.material {
        case .publicKey(let publicKey): return publicKey.x963Representation as NSData
        case .privateKey(let privateKey): return privateKey.x963Representation.unprotectedData() as NSData
        case .enclave:
            throw KeychainStatus(
                KeychainStatus.Code(rawValue: errSecUnimplemented), "an enclave key cannot be exported")
        case .opaque:
            throw KeychainStatus(KeychainStatus.Code(rawValue: errSecUnimplemented), "the key is not a P-256 key")
        }
    }
}

/// Makes a key from its external representation.
///
/// - Parameters:
///   - keyData: `04 || X || Y` (public) or `04 || X || Y || D` (private), P-256.
///   - attributes: `kSecAttrKeyType` (`kSecAttrKeyTypeECSECPrimeRandom`) and `kSecAttrKeyClass` (public or private)
///     are required; other key attributes are kept for `SecKeyCopyAttributes`.
/// - Returns: the key, or nil: `errSecParam` for a missing or other type or class, `errSecDecode` for bytes that are
///   not such a P-256 key (wrong size, point not on the curve, scalar not matching the point).
@discardableResult
public func SecKeyCreateWithData(
    _ keyData: CFData, _ attributes: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    reportingError(error) {
        var attributes = try SecKeyGeneration.plainAttributes(attributes)
        try SecKeyGeneration.checkKeyType(attributes)
        let bytes = contents(of: keyData)
        let material: SecKey.Material
        do {
            switch attributes["kcls"] {
            case .string(kSecAttrKeyClassPublic), .integer(0):
                material = .publicKey(try P256.PublicKey(x963Representation: bytes))
            case .string(kSecAttrKeyClassPrivate), .integer(1):
                material = .privateKey(try P256.PrivateKey(x963Representation: SecureBytes(bytes)))
            default:
                throw KeychainStatus(.param, "kSecAttrKeyClass must be public or private")
            }
        } catch is CryptoError {
            throw KeychainStatus(.decode, "the bytes are not a P-256 key of this class")
        }
        for name in ["type", "kcls", "bsiz", "tkid"] { attributes[name] = nil }
        return SecKey(material: material, attributes: attributes)
    }
}

/// The key's attributes: class, type, size, application label (SHA-1 of the public key), token, usage flags, the
/// tag, label and access control it was created or stored with, and for a public key its bytes (`kSecValueData`).
@discardableResult
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    SecItemConversion.dictionary(key.keyAttributes)
}

/// Whether `key` can run `algorithm` for `operation`.
///
/// Private keys sign, decrypt and exchange keys; public keys verify and encrypt. See `SecKeyAlgorithm` for the
/// algorithms this implementation runs.
@discardableResult
public func SecKeyIsAlgorithmSupported(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm)
    -> Bool
{
    guard key.publicKey != nil, let kind = SecKeyAlgorithmKind.table[algorithm] else { return false }
    let operations = kind.operations
    return (key.isPrivate ? operations.privateKey : operations.publicKey) == operation
}

/// Signs `dataToSign` with a private key.
///
/// - Parameters:
///   - key: the private key (a software key, or an enclave key's handle).
///   - algorithm: an ECDSA algorithm. `…Message…` variants hash the input; `…Digest…SHA256` variants take the
///     digest itself, exactly 32 bytes (other sizes: `errSecParam`, as Apple's "bad digest size").
///   - dataToSign: the message or the digest, as `algorithm` says.
///   - error: receives the failure.
/// - Returns: the signature (DER for X9.62, 64-byte `r || s` for RFC 4754), or nil: `errSecParam` for an
///   algorithm the key does not support or a digest of the wrong size; for an enclave key, the engine's refusal when
///   the key's access control is not satisfied (`errSecInteractionNotAllowed`, `errSecAuthFailed`,
///   `errSecUserCanceled`).
@discardableResult
public func SecKeyCreateSignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    reportingError(error) {
        guard case .ecdsa(let input, let raw)? = supportedKind(key, .sign, algorithm) else {
            throw unsupported(algorithm)
        }
        let digest = try digest(of: contents(of: dataToSign), input)
        let der: Data
        switch key.material {
        case .privateKey(let privateKey):
            der = try privateKey.signature(forDigest: digest).derRepresentation
        case .enclave(let handle, _, let client, let context):
            guard
                case .signature(let signature) = try client.sendBlocking(
                    .sign(handle: handle, digest: digest, context: context?.id), context: context?.handle)
            else { throw KeychainStatus(.internalComponent, "the engine answered another request") }
            der = signature
        default:
            throw unsupported(algorithm)
        }
        guard raw else { return der as NSData }
        return try ECDSASignature(derRepresentation: der).rawRepresentation as NSData
    }
}

/// Verifies a signature with a public key.
///
/// - Returns: true when `signature` is valid; false with `errSecVerifyFailed` when it is not (or is not a
///   signature in the algorithm's encoding), with `errSecParam` for an unsupported algorithm or a digest of the
///   wrong size.
@discardableResult
public func SecKeyVerifySignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    reportingError(error) {
        guard case .ecdsa(let input, let raw)? = supportedKind(key, .verify, algorithm),
            let publicKey = key.publicKey
        else { throw unsupported(algorithm) }
        let digest = try digest(of: contents(of: signedData), input)
        let bytes = contents(of: signature)
        let parsed = try? (raw ? ECDSASignature(rawRepresentation: bytes) : ECDSASignature(derRepresentation: bytes))
        guard let parsed, publicKey.isValidSignature(parsed, forDigest: digest) else {
            throw KeychainStatus(
                KeychainStatus.Code(rawValue: errSecVerifyFailed), "ECDSA signature verification failed")
        }
        return true
    } ?? false
}

/// Encrypts `plaintext` to a public key with Apple's ECIES (byte-compatible with Apple's output).
///
/// - Returns: `ephemeral public key (65) || ciphertext || tag (16)`, or nil with `errSecParam` for an algorithm the
///   key does not support.
@discardableResult
public func SecKeyCreateEncryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    reportingError(error) {
        guard case .ecies(let variant)? = supportedKind(key, .encrypt, algorithm), let publicKey = key.publicKey
        else { throw unsupported(algorithm) }
        return try ECIES.seal(contents(of: plaintext), to: publicKey, variant: variant) as NSData
    }
}

/// Decrypts an Apple ECIES ciphertext with a private key.
///
/// - Returns: the plaintext, or nil: `errSecParam` for an unsupported algorithm or a ciphertext that is too short,
///   names no P-256 point or does not authenticate; for an enclave key, the engine's refusal when the key's access
///   control is not satisfied.
@discardableResult
public func SecKeyCreateDecryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    reportingError(error) {
        guard case .ecies(let variant)? = supportedKind(key, .decrypt, algorithm) else {
            throw unsupported(algorithm)
        }
        let bytes = contents(of: ciphertext)
        let plaintext: SecureBytes
        switch key.material {
        case .privateKey(let privateKey):
            do {
                plaintext = try ECIES.open(bytes, with: privateKey, variant: variant)
            } catch is CryptoError {
                throw KeychainStatus(.param, "ECIES: the ciphertext does not decrypt with this key")
            }
        case .enclave(let handle, _, let client, let context):
            guard
                case .secret(let secret) = try client.sendBlocking(
                    .decrypt(handle: handle, ciphertext: bytes, variant: variant, context: context?.id),
                    context: context?.handle)
            else { throw KeychainStatus(.internalComponent, "the engine answered another request") }
            plaintext = secret
        default:
            throw unsupported(algorithm)
        }
        return plaintext.unprotectedData() as NSData
    }
}

/// ECDH between a private key and a public key, optionally through the X9.63 KDF.
///
/// - Parameters:
///   - privateKey: our P-256 private key (a software key, or an enclave key's handle).
///   - algorithm: `ecdhKeyExchangeStandard`, `ecdhKeyExchangeCofactor` or one of their `…X963SHA…` variants (SHA-1,
///     SHA-224, SHA-256, SHA-384, SHA-512).
///   - publicKey: the other side's P-256 public key.
///   - parameters: for the `…X963SHA…` variants, `kSecKeyKeyExchangeParameterRequestedSize` (required) and
///     `kSecKeyKeyExchangeParameterSharedInfo` (optional); ignored by raw ECDH.
///   - error: receives the failure.
/// - Returns: Z (32 bytes) or the derived bytes, or nil: `errSecParam` for an unsupported algorithm, a missing or
///   invalid requested size, or a public key that is not P-256; for an enclave key, the engine's refusal when the
///   key's access control is not satisfied.
@discardableResult
public func SecKeyCopyKeyExchangeResult(
    _ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey, _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    reportingError(error) {
        guard case .ecdh(let kdfDigest)? = supportedKind(privateKey, .keyExchange, algorithm) else {
            throw unsupported(algorithm)
        }
        guard let peer = publicKey.publicKey else { throw KeychainStatus(.param, "the public key is not P-256") }
        var kdf: X963KDFParameters?
        if let kdfDigest {
            var requestedSize: Int?
            var sharedInfo = Data()
            for (name, value) in parameters {
                switch name as? String {
                case kSecKeyKeyExchangeParameterRequestedSize:
                    guard let number = value as? NSNumber, number.intValue > 0 else {
                        throw KeychainStatus(
                            .param, "kSecKeyKeyExchangeParameterRequestedSize is not a positive number")
                    }
                    requestedSize = number.intValue
                case kSecKeyKeyExchangeParameterSharedInfo:
                    guard let data = value as? Data else {
                        throw KeychainStatus(.param, "kSecKeyKeyExchangeParameterSharedInfo is not data")
                    }
                    sharedInfo = data
                default:
                    break
                }
            }
            guard let requestedSize, requestedSize <= X963KDF.maximumOutputByteCount else {
                throw KeychainStatus(
                    .param,
                    "kSecKeyKeyExchangeParameterRequestedSize is missing or over \(X963KDF.maximumOutputByteCount)")
            }
            kdf = X963KDFParameters(digest: kdfDigest, sharedInfo: sharedInfo, byteCount: requestedSize)
        }
        let secret: SecureBytes
        switch privateKey.material {
        case .privateKey(let key):
            if let kdf {
                secret = try key.sharedSecret(
                    with: peer, x963SharedInfo: kdf.sharedInfo, outputByteCount: kdf.byteCount, digest: kdf.digest)
            } else {
                secret = try key.sharedSecret(with: peer)
            }
        case .enclave(let handle, _, let client, let context):
            guard
                case .secret(let result) = try client.sendBlocking(
                    .keyExchange(handle: handle, peer: peer.x963Representation, kdf: kdf, context: context?.id),
                    context: context?.handle)
            else { throw KeychainStatus(.internalComponent, "the engine answered another request") }
            secret = result
        default:
            throw unsupported(algorithm)
        }
        return secret.unprotectedData() as NSData
    }
}

// MARK: Helpers

/// The algorithm's kind when `key` supports it for `operation`, else nil.
private func supportedKind(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm)
    -> SecKeyAlgorithmKind?
{
    SecKeyIsAlgorithmSupported(key, operation, algorithm) ? SecKeyAlgorithmKind.table[algorithm] : nil
}

private func unsupported(_ algorithm: SecKeyAlgorithm) -> KeychainStatus {
    KeychainStatus(.param, "algorithm \(algorithm.rawValue) is not supported by the key")
}

/// The bytes of `data`, copied in one piece (the `as Data` bridge of swift-corelibs-foundation copies byte by byte,
/// which would cost more than a signature's hashing).
private func contents(of data: CFData) -> Data {
    data.length == 0 ? Data() : Data(bytes: data.bytes, count: data.length)
}

/// The digest ECDSA signs for `input`.
private func digest(of data: Data, _ input: SecKeyAlgorithmKind.ECDSAInput) throws -> Data {
    switch input {
    case .message(let digest): return digest.hash(data)
    case .digest(let byteCount?):
        guard data.count == byteCount else { throw KeychainStatus(.param, "ECDSA signature: bad digest size") }
        return data
    case .digest(nil):
        guard (1...64).contains(data.count) else { throw KeychainStatus(.param, "ECDSA signature: bad digest size") }
        return data
    }
}

/// Runs `body`; on failure stores an `NSOSStatusErrorDomain` error with the `OSStatus` in `error` (as Apple's
/// `CFError`s carry it) and returns nil.
func reportingError<Result>(
    _ errorPointer: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws -> Result
) -> Result? {
    do {
        return try body()
    } catch {
        let status = (error as? KeychainStatus) ?? KeychainStatus(.internalComponent, "internal failure")
        reportStatus(status, to: errorPointer)
        return nil
    }
}

private func reportStatus(_ status: KeychainStatus, to error: UnsafeMutablePointer<Unmanaged<CFError>?>?) {
    error?.pointee = Unmanaged.passRetained(
        NSError(
            domain: NSOSStatusErrorDomain, code: Int(status.code.rawValue),
            userInfo: [NSLocalizedDescriptionKey: status.message]))
}
