import Foundation
import SecureCrypto

/// A cryptographic algorithm for the `SecKey` functions, named by Apple's string (`algid:…`).
///
/// Every P-256 algorithm Apple defines is spelled here with Apple's value. `SecKeyIsAlgorithmSupported` tells which
/// ones this implementation runs: all ECDSA digest variants, ECDSA over messages with SHA-1 and SHA-256, ECIES and
/// X9.63 ECDH with SHA-256, and raw ECDH. (Apple also runs the SHA-224/384/512 message, ECIES and ECDH variants;
/// here they are unsupported and fail with `errSecParam`.) RSA keys do not exist here.
///
/// Safe to share: `rawValue` is an immutable string object, never mutated after creation.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, @unchecked Sendable {
    /// Apple's string for the algorithm.
    public var rawValue: CFString

    /// Names an algorithm by its string.
    public init(rawValue: CFString) { self.rawValue = rawValue }

    /// Names an algorithm by its string.
    public init(_ rawValue: CFString) { self.rawValue = rawValue }

    // MARK: ECDSA
    /// ECDSA over a digest given as is; the signature is raw `r || s` (RFC 4754).
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm(rawValue: ConstantString("algid:sign:ECDSA:RFC4754"))
    /// ECDSA over a digest given as is; the signature is DER (X9.62).
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-X962"))
    /// ECDSA over a SHA1 digest (input exactly the digest's size); DER signature.
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-X962:SHA1"))
    /// ECDSA over a SHA224 digest (input exactly the digest's size); DER signature.
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-X962:SHA224"))
    /// ECDSA over a SHA256 digest (input exactly the digest's size); DER signature.
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-X962:SHA256"))
    /// ECDSA over a SHA384 digest (input exactly the digest's size); DER signature.
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-X962:SHA384"))
    /// ECDSA over a SHA512 digest (input exactly the digest's size); DER signature.
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-X962:SHA512"))
    /// ECDSA over the SHA1 digest of the message; DER signature.
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-X962:SHA1"))
    /// ECDSA over the SHA224 digest of the message; DER signature.
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-X962:SHA224"))
    /// ECDSA over the SHA256 digest of the message; DER signature.
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-X962:SHA256"))
    /// ECDSA over the SHA384 digest of the message; DER signature.
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-X962:SHA384"))
    /// ECDSA over the SHA512 digest of the message; DER signature.
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-X962:SHA512"))
    /// ECDSA over a SHA1 digest (input exactly the digest's size); raw `r || s` signature.
    public static let ecdsaSignatureDigestRFC4754SHA1 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-RFC4754:SHA1"))
    /// ECDSA over a SHA224 digest (input exactly the digest's size); raw `r || s` signature.
    public static let ecdsaSignatureDigestRFC4754SHA224 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-RFC4754:SHA224"))
    /// ECDSA over a SHA256 digest (input exactly the digest's size); raw `r || s` signature.
    public static let ecdsaSignatureDigestRFC4754SHA256 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-RFC4754:SHA256"))
    /// ECDSA over a SHA384 digest (input exactly the digest's size); raw `r || s` signature.
    public static let ecdsaSignatureDigestRFC4754SHA384 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-RFC4754:SHA384"))
    /// ECDSA over a SHA512 digest (input exactly the digest's size); raw `r || s` signature.
    public static let ecdsaSignatureDigestRFC4754SHA512 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:digest-RFC4754:SHA512"))
    /// ECDSA over the SHA1 digest of the message; raw `r || s` signature.
    public static let ecdsaSignatureMessageRFC4754SHA1 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-RFC4754:SHA1"))
    /// ECDSA over the SHA224 digest of the message; raw `r || s` signature.
    public static let ecdsaSignatureMessageRFC4754SHA224 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-RFC4754:SHA224"))
    /// ECDSA over the SHA256 digest of the message; raw `r || s` signature.
    public static let ecdsaSignatureMessageRFC4754SHA256 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-RFC4754:SHA256"))
    /// ECDSA over the SHA384 digest of the message; raw `r || s` signature.
    public static let ecdsaSignatureMessageRFC4754SHA384 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-RFC4754:SHA384"))
    /// ECDSA over the SHA512 digest of the message; raw `r || s` signature.
    public static let ecdsaSignatureMessageRFC4754SHA512 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:sign:ECDSA:message-RFC4754:SHA512"))

    // MARK: ECIES
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA1, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA224, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA256, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA384, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA512, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA224, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA256, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA384, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV"))
    /// Apple ECIES (standard ECDH, X9.63 KDF with SHA512, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA1, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA224, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA256, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA384, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA512, AES-GCM with a zero IV: the legacy variant).
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA224, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA256, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA384, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV"))
    /// Apple ECIES (cofactor ECDH, X9.63 KDF with SHA512, AES-GCM with the IV from the KDF).
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: ConstantString("algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV"))

    // MARK: ECDH
    /// ECDH; the result is the shared secret Z (the x-coordinate).
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm(rawValue: ConstantString("algid:keyexchange:ECDH"))
    /// Cofactor ECDH; on P-256 (cofactor 1) the same as standard ECDH.
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm(rawValue: ConstantString("algid:keyexchange:ECDHC"))
    /// Standard ECDH, then the X9.63 KDF with SHA1 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDH:KDFX963:SHA1"))
    /// Standard ECDH, then the X9.63 KDF with SHA224 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDH:KDFX963:SHA224"))
    /// Standard ECDH, then the X9.63 KDF with SHA256 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDH:KDFX963:SHA256"))
    /// Standard ECDH, then the X9.63 KDF with SHA384 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDH:KDFX963:SHA384"))
    /// Standard ECDH, then the X9.63 KDF with SHA512 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDH:KDFX963:SHA512"))
    /// Cofactor ECDH, then the X9.63 KDF with SHA1 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDHC:KDFX963:SHA1"))
    /// Cofactor ECDH, then the X9.63 KDF with SHA224 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDHC:KDFX963:SHA224"))
    /// Cofactor ECDH, then the X9.63 KDF with SHA256 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDHC:KDFX963:SHA256"))
    /// Cofactor ECDH, then the X9.63 KDF with SHA384 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDHC:KDFX963:SHA384"))
    /// Cofactor ECDH, then the X9.63 KDF with SHA512 (`kSecKeyKeyExchangeParameterRequestedSize` required).
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm(
        rawValue: ConstantString("algid:keyexchange:ECDHC:KDFX963:SHA512"))
}

/// What a key is asked to do, for `SecKeyIsAlgorithmSupported`, with Apple's raw values.
public enum SecKeyOperationType: Int, Sendable {
    /// `SecKeyCreateSignature`.
    case sign = 0
    /// `SecKeyVerifySignature`.
    case verify = 1
    /// `SecKeyCreateEncryptedData`.
    case encrypt = 2
    /// `SecKeyCreateDecryptedData`.
    case decrypt = 3
    /// `SecKeyCopyKeyExchangeResult`.
    case keyExchange = 4
}

/// `SecKeyCopyKeyExchangeResult` parameter: the number of bytes to derive (a number; required by the X9.63
/// variants).
nonisolated(unsafe) public let kSecKeyKeyExchangeParameterRequestedSize: CFString = ConstantString("requestedSize")

/// `SecKeyCopyKeyExchangeResult` parameter: the X9.63 KDF's shared info (data; optional).
nonisolated(unsafe) public let kSecKeyKeyExchangeParameterSharedInfo: CFString = ConstantString("sharedInfo")

/// How this implementation runs each supported algorithm.
enum SecKeyAlgorithmKind: Sendable {
    /// ECDSA: what is signed, and the signature's encoding.
    case ecdsa(ECDSAInput, raw: Bool)
    /// Apple ECIES: the IV's source and the KDF's hash.
    case ecies(ECIES.Variant)
    /// ECDH; with `kdf`, followed by the X9.63 KDF with that hash.
    case ecdh(kdf: DigestAlgorithm?)

    enum ECDSAInput: Sendable {
        /// A digest of exactly this many bytes, or of any size ECDSA takes (1…64) when nil.
        case digest(byteCount: Int?)
        /// A message, hashed here with this function.
        case message(DigestAlgorithm)
    }

    static let table: [SecKeyAlgorithm: SecKeyAlgorithmKind] = [
        .ecdsaSignatureRFC4754: .ecdsa(.digest(byteCount: nil), raw: true),
        .ecdsaSignatureDigestX962: .ecdsa(.digest(byteCount: nil), raw: false),
        .ecdsaSignatureDigestX962SHA1: .ecdsa(.digest(byteCount: 20), raw: false),
        .ecdsaSignatureDigestX962SHA224: .ecdsa(.digest(byteCount: 28), raw: false),
        .ecdsaSignatureDigestX962SHA256: .ecdsa(.digest(byteCount: 32), raw: false),
        .ecdsaSignatureDigestX962SHA384: .ecdsa(.digest(byteCount: 48), raw: false),
        .ecdsaSignatureDigestX962SHA512: .ecdsa(.digest(byteCount: 64), raw: false),
        .ecdsaSignatureDigestRFC4754SHA1: .ecdsa(.digest(byteCount: 20), raw: true),
        .ecdsaSignatureDigestRFC4754SHA224: .ecdsa(.digest(byteCount: 28), raw: true),
        .ecdsaSignatureDigestRFC4754SHA256: .ecdsa(.digest(byteCount: 32), raw: true),
        .ecdsaSignatureDigestRFC4754SHA384: .ecdsa(.digest(byteCount: 48), raw: true),
        .ecdsaSignatureDigestRFC4754SHA512: .ecdsa(.digest(byteCount: 64), raw: true),
        .ecdsaSignatureMessageX962SHA1: .ecdsa(.message(.sha1), raw: false),
        .ecdsaSignatureMessageX962SHA224: .ecdsa(.message(.sha224), raw: false),
        .ecdsaSignatureMessageX962SHA256: .ecdsa(.message(.sha256), raw: false),
        .ecdsaSignatureMessageX962SHA384: .ecdsa(.message(.sha384), raw: false),
        .ecdsaSignatureMessageX962SHA512: .ecdsa(.message(.sha512), raw: false),
        .ecdsaSignatureMessageRFC4754SHA1: .ecdsa(.message(.sha1), raw: true),
        .ecdsaSignatureMessageRFC4754SHA224: .ecdsa(.message(.sha224), raw: true),
        .ecdsaSignatureMessageRFC4754SHA256: .ecdsa(.message(.sha256), raw: true),
        .ecdsaSignatureMessageRFC4754SHA384: .ecdsa(.message(.sha384), raw: true),
        .ecdsaSignatureMessageRFC4754SHA512: .ecdsa(.message(.sha512), raw: true),
        // Apple defines no variable-IV ECIES with SHA-1. Standard and Cofactor are one computation on P-256.
        .eciesEncryptionStandardX963SHA1AESGCM: .ecies(.init(iv: .zero, digest: .sha1)),
        .eciesEncryptionCofactorX963SHA1AESGCM: .ecies(.init(iv: .zero, digest: .sha1)),
        .eciesEncryptionStandardX963SHA224AESGCM: .ecies(.init(iv: .zero, digest: .sha224)),
        .eciesEncryptionCofactorX963SHA224AESGCM: .ecies(.init(iv: .zero, digest: .sha224)),
        .eciesEncryptionStandardX963SHA256AESGCM: .ecies(.zeroIV),
        .eciesEncryptionCofactorX963SHA256AESGCM: .ecies(.zeroIV),
        .eciesEncryptionStandardX963SHA384AESGCM: .ecies(.init(iv: .zero, digest: .sha384)),
        .eciesEncryptionCofactorX963SHA384AESGCM: .ecies(.init(iv: .zero, digest: .sha384)),
        .eciesEncryptionStandardX963SHA512AESGCM: .ecies(.init(iv: .zero, digest: .sha512)),
        .eciesEncryptionCofactorX963SHA512AESGCM: .ecies(.init(iv: .zero, digest: .sha512)),
        .eciesEncryptionStandardVariableIVX963SHA224AESGCM: .ecies(.init(iv: .fromKDF, digest: .sha224)),
        .eciesEncryptionCofactorVariableIVX963SHA224AESGCM: .ecies(.init(iv: .fromKDF, digest: .sha224)),
        .eciesEncryptionStandardVariableIVX963SHA256AESGCM: .ecies(.variableIV),
        .eciesEncryptionCofactorVariableIVX963SHA256AESGCM: .ecies(.variableIV),
        .eciesEncryptionStandardVariableIVX963SHA384AESGCM: .ecies(.init(iv: .fromKDF, digest: .sha384)),
        .eciesEncryptionCofactorVariableIVX963SHA384AESGCM: .ecies(.init(iv: .fromKDF, digest: .sha384)),
        .eciesEncryptionStandardVariableIVX963SHA512AESGCM: .ecies(.init(iv: .fromKDF, digest: .sha512)),
        .eciesEncryptionCofactorVariableIVX963SHA512AESGCM: .ecies(.init(iv: .fromKDF, digest: .sha512)),
        .ecdhKeyExchangeStandard: .ecdh(kdf: nil),
        .ecdhKeyExchangeCofactor: .ecdh(kdf: nil),
        .ecdhKeyExchangeStandardX963SHA1: .ecdh(kdf: .sha1),
        .ecdhKeyExchangeCofactorX963SHA1: .ecdh(kdf: .sha1),
        .ecdhKeyExchangeStandardX963SHA224: .ecdh(kdf: .sha224),
        .ecdhKeyExchangeCofactorX963SHA224: .ecdh(kdf: .sha224),
        .ecdhKeyExchangeStandardX963SHA256: .ecdh(kdf: .sha256),
        .ecdhKeyExchangeCofactorX963SHA256: .ecdh(kdf: .sha256),
        .ecdhKeyExchangeStandardX963SHA384: .ecdh(kdf: .sha384),
        .ecdhKeyExchangeCofactorX963SHA384: .ecdh(kdf: .sha384),
        .ecdhKeyExchangeStandardX963SHA512: .ecdh(kdf: .sha512),
        .ecdhKeyExchangeCofactorX963SHA512: .ecdh(kdf: .sha512),
    ]

    /// The operation this algorithm serves with a private key (sign, decrypt, key exchange) and with a public key
    /// (verify, encrypt).
    var operations: (privateKey: SecKeyOperationType?, publicKey: SecKeyOperationType?) {
        switch self {
        case .ecdsa: (.sign, .verify)
        case .ecies: (.decrypt, .encrypt)
        case .ecdh: (.keyExchange, nil)
        }
    }
}
