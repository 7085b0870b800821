import Foundation
import SecureCrypto

/// The passcode layer of a protected keybag: the `ak`/`aku`/`akpu`/`ck`/`cku` class keys sealed under a key that
/// needs both the device root key (a file, or sealed to the TPM) and the user's passcode, as Apple tangles the
/// passcode with the Secure Enclave's UID. Without the passcode, a copy of the store directory (even with the
/// root key) holds these keys only sealed; the passcode is stretched by scrypt (parameters stored beside it), so
/// each guess costs 32 MiB and about 0.1 s.
struct PasscodeProtection {
    /// scrypt's parameters and salt.
    var kdf: PasswordKDF
    /// Each passcode class key sealed under the wrapping key, bound to its class's name.
    var sealed: [ProtectionClass: Data]

    /// The classes whose keys need the passcode: every class but `dk`/`dku`.
    static let classes = ProtectionClass.allCases.filter { $0.availability != .always }

    /// The keys of `slot`, in the order `UnlockedKeys` concatenates them.
    static func classes(in slot: UnlockedSlot) -> [ProtectionClass] {
        classes.filter { ($0.availability == .unlocked) == (slot == .unlocked) }
    }

    /// Seals `keys` (every passcode class) under a fresh salt.
    static func seal(
        _ keys: [ProtectionClass: SecureBytes], passcode: SecureBytes, rootKey: SecureBytes
    ) throws -> PasscodeProtection {
        let kdf = try PasswordKDF.scrypt()
        let wrappingKey = try wrappingKey(passcode: passcode, rootKey: rootKey, kdf: kdf)
        var sealed: [ProtectionClass: Data] = [:]
        for protectionClass in classes {
            sealed[protectionClass] = try AESGCM.seal(
                keys[protectionClass]!, using: wrappingKey, authenticating: binding(protectionClass)
            ).combined
        }
        return PasscodeProtection(kdf: kdf, sealed: sealed)
    }

    /// The class keys, opened with `passcode`.
    ///
    /// - Throws: `EnclaveError.wrongPassword` when they do not open (another passcode, or changed bytes).
    func open(passcode: SecureBytes, rootKey: SecureBytes) throws -> [ProtectionClass: SecureBytes] {
        let wrappingKey = try Self.wrappingKey(passcode: passcode, rootKey: rootKey, kdf: kdf)
        var keys: [ProtectionClass: SecureBytes] = [:]
        do {
            for protectionClass in Self.classes {
                keys[protectionClass] = try AESGCM.open(
                    AESGCM.SealedBox(combined: sealed[protectionClass]!), using: wrappingKey,
                    authenticating: Self.binding(protectionClass))
            }
        } catch {
            throw EnclaveError(.wrongPassword, "the keychain does not open with this passcode")
        }
        return keys
    }

    /// HKDF-SHA256 over the root key and scrypt(passcode): neither alone opens the class keys.
    private static func wrappingKey(
        passcode: SecureBytes, rootKey: SecureBytes, kdf: PasswordKDF
    ) throws -> SecureBytes {
        let stretched = try kdf.deriveKey(from: passcode)
        return try HKDFSHA256.deriveKey(
            inputKeyMaterial: rootKey.appending(stretched), info: Data("la.keybag.passcode-wrapping.v3".utf8),
            outputByteCount: 32)
    }

    private static func binding(_ protectionClass: ProtectionClass) -> Data {
        Data("la.keybag.v3:passcode:\(protectionClass.rawValue)".utf8)
    }

}

extension PasscodeProtection {
    // MARK: Keybag entries

    /// The keybag entries holding this layer: `passcode-kdf` and `pc:<class>`.
    var entries: [String: Data] {
        var out: [String: Data] = [:]
        // PasswordKDF is a plain Codable of numbers and a salt: encoding cannot fail.
        out["passcode-kdf"] = (try? JSONEncoder().encode(kdf)) ?? Data()
        for (protectionClass, value) in sealed { out["pc:" + protectionClass.rawValue] = value }
        return out
    }

    /// The layer in a keybag's entries, or nil when the keybag has none (a store not yet unlocked by passcode).
    ///
    /// - Throws: `EnclaveError.corrupt` when the entries are partial or their parameters are out of bounds.
    init?(entries: [String: Data]) throws {
        guard let kdfBytes = entries["passcode-kdf"] else { return nil }
        guard let kdf = try? JSONDecoder().decode(PasswordKDF.self, from: kdfBytes).checkedForUntrustedInput() else {
            throw EnclaveError(.corrupt, "the keybag's passcode parameters are damaged")
        }
        var sealed: [ProtectionClass: Data] = [:]
        for protectionClass in Self.classes {
            guard let value = entries["pc:" + protectionClass.rawValue] else {
                throw EnclaveError(.corrupt, "the keybag does not hold every passcode-protected key")
            }
            sealed[protectionClass] = value
        }
        self.init(kdf: kdf, sealed: sealed)
    }
}
