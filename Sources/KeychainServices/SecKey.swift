import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol

/// A P-256 key: what `SecKeyCreateRandomKey`, `SecKeyCreateWithData` and `SecKeyCopyPublicKey` return, and what
/// `kSecReturnRef` returns for key items.
///
/// A software key holds its key in this process (the private scalar in secure memory). An enclave key
/// (`kSecAttrTokenIDSecureEnclave`) holds only its public key and a handle the engine gave it: the private key stays in
/// the enclave (sealed under the device root key, or inside the TPM on the TPM backend), and every private-key
/// operation is a request to the engine, which checks the key's access control first. A key item whose bytes are not a
/// P-256 key (stored by other code) gives a key that supports no operation.
public final class SecKey: Sendable {
    /// The `LAContext` an enclave key's operations use: its engine handle (fixed when the key was made or found)
    /// and the object itself, whose presenter and texts the operations' prompts use (nil when the caller passed
    /// the handle's bytes: then nothing is asked that the context does not already satisfy).
    struct KeyContext: Sendable {
        let id: AuthenticationContextID
        let handle: (any AuthenticationContextHandle)?
    }

    enum Material: Sendable {
        case publicKey(P256.PublicKey)
        case privateKey(P256.PrivateKey)
        case enclave(handle: Data, publicKey: P256.PublicKey, client: any SecurityClient, context: KeyContext?)
        case opaque(SecureBytes)
    }

    let material: Material
    /// The attributes the key was created or stored with (tag, label, access control, permanence…).
    let storedAttributes: [String: KeychainValue]

    init(material: Material, attributes: [String: KeychainValue]) {
        self.material = material
        self.storedAttributes = attributes
    }

    /// A key from a key item's material (what `kSecReturnRef` gives): its stored bytes, attributes and, for an
    /// enclave key, the public key the engine read from the handle. An enclave key is bound to the client serving
    /// the current request.
    convenience init(_ item: ItemMaterial) {
        self.init(
            material: Self.material(
                keyData: item.data, attributes: item.attributes, enclavePublicKey: item.enclavePublicKey),
            attributes: item.attributes)
    }

    /// The bytes a key item stores for this key (`kSecValueRef` in `SecItemAdd`): `04||X||Y`, `04||X||Y||D`, or an
    /// enclave key's handle.
    var keyData: SecureBytes {
        switch material {
        case .publicKey(let key): SecureBytes(key.x963Representation)
        case .privateKey(let key): key.x963Representation
        case .enclave(let handle, _, _, _): SecureBytes(handle)
        case .opaque(let bytes): bytes
        }
    }

    /// The public key of a P-256 key (nil for an opaque one).
    var publicKey: P256.PublicKey? {
        switch material {
        case .publicKey(let key): key
        case .privateKey(let key): key.publicKey
        case .enclave(_, let key, _, _): key
        case .opaque: nil
        }
    }

    /// Whether this is a private key (software or enclave).
    var isPrivate: Bool {
        switch material {
        case .privateKey, .enclave: true
        case .publicKey, .opaque: false
        }
    }

    private static func material(
        keyData: SecureBytes, attributes: [String: KeychainValue], enclavePublicKey: Data?
    ) -> Material {
        if attributes["tkid"] == .string(kSecAttrTokenIDSecureEnclave as String) {
            let handle = keyData.unprotectedData()
            if let point = enclavePublicKey,
                let publicKey = try? P256.PublicKey(x963Representation: point),
                let client = try? KeychainClientSelection.resolve()
            {
                return .enclave(handle: handle, publicKey: publicKey, client: client, context: lookupContext)
            }
            return .opaque(keyData)
        }
        switch keyData.count {
        case P256.privateKeyByteCount:
            if let key = try? P256.PrivateKey(x963Representation: keyData) { return .privateKey(key) }
        case P256.publicKeyByteCount:
            if let key = try? P256.PublicKey(x963Representation: keyData.unprotectedData()) { return .publicKey(key) }
        default:
            break
        }
        return .opaque(keyData)
    }

    /// The `kSecUseAuthenticationContext` of the `SecItemCopyMatching` whose results are being shaped: an enclave
    /// key it returns uses that context for its private-key operations, as on Apple platforms.
    @TaskLocal static var lookupContext: KeyContext?

    /// Runs `body` (shaping the results of `request`) with `request`'s authentication context, which `handle`
    /// stands for, as `lookupContext`.
    static func withLookupContext<Result>(
        of request: KeychainRequest, handle: (any AuthenticationContextHandle)?, _ body: () -> Result
    ) -> Result {
        guard case .copyMatching(let query) = request, case .data(let id)? = query["u_AuthCtx"] else { return body() }
        let context = KeyContext(id: AuthenticationContextID(bytes: [UInt8](id)), handle: handle)
        return $lookupContext.withValue(context, operation: body)
    }

    /// What `SecKeyCopyAttributes` returns, and what `kSecValueRef` in `SecItemAdd` takes the key's class, type,
    /// size, label and token from: the stored or creation attributes, then what the key itself says.
    var keyAttributes: [String: KeychainValue] {
        var result = storedAttributes
        result["class"] = .string(kSecClassKey as String)
        guard let publicKey else { return result }
        result["type"] = .string(kSecAttrKeyTypeECSECPrimeRandom as String)
        result["bsiz"] = .integer(256)
        result["esiz"] = .integer(256)
        result["kcls"] = .string((isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic) as String)
        result["klbl"] = .data(InsecureSHA1.hash(publicKey.x963Representation))
        result["sign"] = .bool(isPrivate)
        result["decr"] = .bool(isPrivate)
        result["drve"] = .bool(isPrivate)
        result["vrfy"] = .bool(!isPrivate)
        result["encr"] = .bool(!isPrivate)
        switch material {
        case .enclave: result["tkid"] = .string(kSecAttrTokenIDSecureEnclave as String)
        case .publicKey(let key): result["v_Data"] = .data(key.x963Representation)
        default: break
        }
        return result
    }
}
