import Foundation
import SecureCrypto
import SecurityProtocol

/// The extra layer of an item whose access control has `.applicationPassword`: its data is sealed with a key
/// derived from the context's application password (scrypt, fresh salt per write) before the ordinary per-row
/// layer, so the item's key derivation includes the password and no stored key alone opens it.
///
/// Layout: `"lapw"`, version 1, the `PasswordKDF` parameters as JSON (length-prefixed), AES-256-GCM combined box.
enum ApplicationPasswordSeal {
    private static let magic = Data("lapw".utf8) + Data([1])
    private static let binding = Data("la.application-password.v1".utf8)

    /// Seals `data` under `password`.
    static func seal(_ data: SecureBytes, password: SecureBytes) throws -> SecureBytes {
        let kdf = try PasswordKDF.scrypt(cost: 1 << 14)
        let key = try kdf.deriveKey(from: password)
        let parameters = try JSONEncoder().encode(kdf)
        let box = try AESGCM.seal(data, using: key, authenticating: binding)
        var out = magic
        var length = UInt32(parameters.count).bigEndian
        out.append(Data(bytes: &length, count: 4))
        out.append(parameters)
        out.append(box.combined)
        return SecureBytes(out)
    }

    /// Opens what `seal` made. - Throws: `KeychainStatus` `.authFailed` for a wrong password, `.decode` for damage.
    static func open(_ sealed: SecureBytes, password: SecureBytes) throws -> SecureBytes {
        let bytes = sealed.unprotectedData()
        guard bytes.count > magic.count + 4, bytes.prefix(magic.count) == magic else {
            throw KeychainStatus(.decode, "the item's application-password layer is damaged")
        }
        var offset = bytes.startIndex + magic.count
        let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        offset += 4
        guard length > 0, bytes.endIndex - offset > length else {
            throw KeychainStatus(.decode, "the item's application-password layer is damaged")
        }
        let kdf: PasswordKDF
        do {
            // Within the item's authenticated layer, but still never derived with parameters out of bounds.
            kdf = try JSONDecoder().decode(PasswordKDF.self, from: bytes[offset..<offset + length])
                .checkedForUntrustedInput()
        } catch {
            throw KeychainStatus(.decode, "the item's application-password layer is damaged")
        }
        let key = try kdf.deriveKey(from: password)
        do {
            return try AESGCM.open(
                AESGCM.SealedBox(combined: Data(bytes[(offset + length)...])), using: key, authenticating: binding)
        } catch {
            throw KeychainStatus(.authFailed, "the application password does not open the item")
        }
    }
}
