import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol

/// `SecKeyCreateRandomKey`'s parameters, validated, and the generation they ask for.
struct SecKeyGeneration {
    /// Top-level attributes, which apply to both keys.
    private var common: [String: KeychainValue] = [:]
    private var privateAttributes: [String: KeychainValue] = [:]
    private var publicAttributes: [String: KeychainValue] = [:]
    private var inEnclave = false
    private var context: SecKey.KeyContext?

    /// - Throws: `KeychainStatus(.param)` for a key type other than EC, a size other than 256, a token other than the
    ///   Secure Enclave, or a malformed dictionary.
    init(_ parameters: NSDictionary) throws {
        for (key, value) in parameters {
            guard let key = key as? String else { throw KeychainStatus(.param, "a parameter key is not a string") }
            switch key {
            case kSecPrivateKeyAttrs: privateAttributes = try subAttributes(value)
            case kSecPublicKeyAttrs: publicAttributes = try subAttributes(value)
            case kSecUseAuthenticationContext: context = try Self.context(value)
            default: common[key] = try SecItemConversion.keychainValue(value)
            }
        }
        try Self.checkKeyType(common)
        if let token = common["tkid"] {
            guard token == .string(kSecAttrTokenIDSecureEnclave as String) else {
                throw KeychainStatus(.param, "the only token is kSecAttrTokenIDSecureEnclave")
            }
            inEnclave = true
        }
        for name in ["type", "bsiz", "esiz", "tkid"] { common[name] = nil }
    }

    /// Generates the key pair (in the enclave or here), stores the permanent halves, and returns the private key.
    func generate() throws -> SecKey {
        let client = try KeychainClientSelection.resolve()
        let privateItem = common.merging(privateAttributes) { _, new in new }
        let publicItem = common.merging(publicAttributes) { _, new in new }
        let material: SecKey.Material
        let publicKey: P256.PublicKey
        if inEnclave {
            var policy: AccessControlPolicy?
            if case .accessControl(let value) = privateItem["accc"] { policy = value }
            var item: [String: KeychainValue]?
            if privateItem["perm"]?.boolValue == true {
                // The engine adds the application label once the key (and so its public key) exists.
                item = self.item(privateItem, keyClass: kSecAttrKeyClassPrivate as String, publicKey: Data())
                item?["tkid"] = .string(kSecAttrTokenIDSecureEnclave as String)
            }
            guard
                case .generated(let handle, let point) = try client.sendBlocking(
                    .generate(accessControl: policy, item: item, context: context?.id), context: context?.handle)
            else { throw KeychainStatus(.internalComponent, "the engine answered another request") }
            publicKey = try P256.PublicKey(x963Representation: point)
            material = .enclave(handle: handle, publicKey: publicKey, client: client, context: context)
        } else {
            if case .accessControl(let policy) = privateItem["accc"],
                policy.flags & UInt64(SecAccessControlCreateFlags.privateKeyUsage.rawValue) != 0
            {
                // Apple documents kSecAccessControlPrivateKeyUsage as required for, and meaningful only with, the
                // Secure Enclave: a software key under it would carry a list nothing enforces.
                throw KeychainStatus(.param, "kSecAccessControlPrivateKeyUsage needs kSecAttrTokenIDSecureEnclave")
            }
            let privateKey = try P256.PrivateKey()
            publicKey = privateKey.publicKey
            if privateItem["perm"]?.boolValue == true {
                var item = self.item(
                    privateItem, keyClass: kSecAttrKeyClassPrivate as String, publicKey: publicKey.x963Representation)
                item["v_Data"] = .data(privateKey.x963Representation.unprotectedData())
                _ = try client.sendBlocking(.add(item), context: context?.handle)
            }
            material = .privateKey(privateKey)
        }
        if publicItem["perm"]?.boolValue == true {
            var item = self.item(
                publicItem, keyClass: kSecAttrKeyClassPublic as String, publicKey: publicKey.x963Representation)
            item["v_Data"] = .data(publicKey.x963Representation)
            _ = try client.sendBlocking(.add(item), context: context?.handle)
        }
        return SecKey(material: material, attributes: privateItem.merging(["perm": .bool(false)]) { old, _ in old })
    }

    /// A key item's `SecItemAdd` attributes (without its value), with the context that authorizes storing it (an
    /// `.applicationPassword` list seals the item under the context's credential).
    private func item(
        _ attributes: [String: KeychainValue], keyClass: String, publicKey: Data
    ) -> [String: KeychainValue] {
        var item = attributes
        if let context { item[kSecUseAuthenticationContext as String] = .data(Data(context.id.bytes)) }
        item["class"] = .string(kSecClassKey as String)
        item["kcls"] = .string(keyClass)
        item["type"] = .string(kSecAttrKeyTypeECSECPrimeRandom as String)
        item["bsiz"] = .integer(256)
        item["esiz"] = .integer(256)
        if item["klbl"] == nil && !publicKey.isEmpty { item["klbl"] = .data(InsecureSHA1.hash(publicKey)) }
        item["perm"] = .bool(true)
        return item
    }

    /// `kSecPrivateKeyAttrs` / `kSecPublicKeyAttrs`: a dictionary of attributes (a context in it applies to the
    /// key's operations).
    private mutating func subAttributes(_ value: Any) throws -> [String: KeychainValue] {
        guard let dictionary = value as? NSDictionary ?? (value as? [String: Any]).map({ $0 as NSDictionary }) else {
            throw KeychainStatus(.param, "kSecPrivateKeyAttrs and kSecPublicKeyAttrs must be dictionaries")
        }
        var result: [String: KeychainValue] = [:]
        for (key, value) in dictionary {
            guard let key = key as? String else { throw KeychainStatus(.param, "an attribute key is not a string") }
            if key == kSecUseAuthenticationContext {
                context = try Self.context(value)
            } else {
                result[key] = try SecItemConversion.keychainValue(value)
            }
        }
        return result
    }

    /// A `kSecUseAuthenticationContext` value and its engine handle, converted as `SecItem` dictionaries convert it.
    private static func context(_ value: Any) throws -> SecKey.KeyContext {
        guard case .data(let id) = try SecItemConversion.keychainValue(value), id.count == 32 else {
            throw KeychainStatus(.param, "kSecUseAuthenticationContext must be an LAContext")
        }
        return SecKey.KeyContext(
            id: AuthenticationContextID(bytes: [UInt8](id)), handle: value as? any AuthenticationContextHandle)
    }

    /// A flat attribute dictionary (`SecKeyCreateWithData`'s attributes), converted.
    static func plainAttributes(_ dictionary: NSDictionary) throws -> [String: KeychainValue] {
        var result: [String: KeychainValue] = [:]
        for (key, value) in dictionary {
            guard let key = key as? String else { throw KeychainStatus(.param, "an attribute key is not a string") }
            result[key] = try SecItemConversion.keychainValue(value)
        }
        return result
    }

    /// Requires an EC key type and (when given) a 256-bit size.
    static func checkKeyType(_ attributes: [String: KeychainValue]) throws {
        switch attributes["type"] {
        case .string(kSecAttrKeyTypeECSECPrimeRandom), .integer(73): break
        case nil: throw KeychainStatus(.param, "kSecAttrKeyType is missing")
        default: throw KeychainStatus(.param, "only kSecAttrKeyTypeECSECPrimeRandom keys are supported")
        }
        switch attributes["bsiz"] {
        case nil, .integer(256), .string("256"): break
        default: throw KeychainStatus(.param, "only 256-bit (P-256) keys are supported")
        }
    }
}
