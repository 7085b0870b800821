import Foundation
import SecureCrypto
import Synchronization
import TrustedPlatform

/// The passcode layer of a protected keybag: the `ak`/`aku`/`akpu`/`ck`/`cku` class keys sealed under a key that
/// needs both the device root key (a file, or sealed to the TPM) and the user's passcode, as Apple tangles the
/// passcode with the Secure Enclave's UID. Without the passcode, a copy of the store directory (even with the
/// root key) holds these keys only sealed; the passcode is stretched by scrypt (parameters stored beside it), so
/// each guess costs 32 MiB and about 0.1 s.
///
/// On the TPM backend the wrapping key also needs a random secret sealed in a TPM object whose authorization is
/// derived from the stretched passcode and which is *not* `noDA`: every wrong passcode tried against it counts
/// towards the TPM's dictionary-attack lockout, and without that TPM no guess can be checked at all, so guessing
/// is neither offline nor fast.
struct PasscodeProtection {
    /// scrypt's parameters and salt.
    var kdf: PasswordKDF
    /// Each passcode class key sealed under the wrapping key, bound to its class's name. `akpu` is absent once its
    /// key was destroyed (the passcode became unusable) until the next unlock makes a new one.
    var sealed: [ProtectionClass: Data]
    /// The TPM object holding the wrapping key's third part (`TPMObject.serialized`), on the TPM backend.
    var tpmSecret: Data?

    /// The classes whose keys need the passcode: every class but `dk`/`dku`.
    static let classes = ProtectionClass.allCases.filter { $0.availability != .always }

    /// The keys of `slot`, in the order `Enclave` joins them into one slot of its ``UnlockedKeyStore``.
    static func classes(in slot: UnlockedSlot) -> [ProtectionClass] {
        classes.filter { ($0.availability == .unlocked) == (slot == .unlocked) }
    }

    /// Seals `keys` (every passcode class) under a fresh salt and, with `tpm`, a fresh TPM-held secret.
    static func seal(
        _ keys: [ProtectionClass: SecureBytes], passcode: SecureBytes, rootKey: SecureBytes, tpm: TPM?
    ) throws -> PasscodeProtection {
        let kdf = try PasswordKDF.scrypt()
        let stretched = try kdf.deriveKey(from: passcode)
        var tpmSecret: Data?
        var secret: SecureBytes?
        if let tpm {
            let fresh = try SecureBytes(randomCount: 32)
            let authorization = try tpmAuthorization(stretched)
            tpmSecret = try using(tpm) {
                try $0.seal(fresh, authorization: authorization, dictionaryAttackProtected: true).serialized
            }
            secret = fresh
        }
        let wrappingKey = try wrappingKey(stretched: stretched, rootKey: rootKey, tpmSecret: secret)
        var sealed: [ProtectionClass: Data] = [:]
        for protectionClass in classes {
            guard let key = keys[protectionClass] else { continue }
            sealed[protectionClass] = try AESGCM.seal(key, using: wrappingKey, authenticating: binding(protectionClass))
                .combined
        }
        return PasscodeProtection(kdf: kdf, sealed: sealed, tpmSecret: tpmSecret)
    }

    /// The class keys, opened with `passcode` (`akpu` missing when it was destroyed), and the wrapping key that
    /// opened them (to seal a new `akpu` key).
    ///
    /// - Throws: `EnclaveError.wrongPassword` when they do not open (another passcode, or changed bytes);
    ///   `.lockedOut` when the TPM refuses every guess now; `.configuration` when the layer is sealed to a TPM
    ///   and `tpm` is nil or does not answer.
    ///
    /// On the TPM backend, `refused` remembers the authorizations the TPM object refused: one refused before is
    /// refused again at once, without a TPM command, so it costs no further dictionary-attack try.
    func open(
        passcode: SecureBytes, rootKey: SecureBytes, tpm: TPM?, refused: RefusedAuthorizations? = nil
    ) throws -> (keys: [ProtectionClass: SecureBytes], wrappingKey: SecureBytes) {
        let stretched = try kdf.deriveKey(from: passcode)
        var secret: SecureBytes?
        if let tpmSecret {
            guard let tpm else {
                throw EnclaveError(
                    .configuration, "the keychain's passcode layer is sealed to a TPM that is not configured")
            }
            guard let object = try? TPMObject(serialized: tpmSecret) else {
                throw EnclaveError(.corrupt, "the keybag's passcode TPM object is damaged")
            }
            let authorization = try Self.tpmAuthorization(stretched)
            if let refused, refused.contains(authorization, for: tpmSecret) {
                throw EnclaveError(
                    .wrongPassword,
                    "the keychain does not open with this passcode (the TPM refused it before; not tried again, so it"
                        + " counts no further towards the TPM's lockout)")
            }
            secret = try Self.using(tpm) { connection in
                do {
                    return try connection.unseal(object, authorization: authorization)
                } catch let error as TPMError where error.isCountedUnsealRefusal {
                    // Remembered only when TPM2_Unseal itself refused the authorization and counted it: never for a
                    // lockout, a transient failure, or a refusal while loading the object or its parent.
                    refused?.add(authorization, for: tpmSecret)
                    throw error
                }
            }
        }
        let wrappingKey = try Self.wrappingKey(stretched: stretched, rootKey: rootKey, tpmSecret: secret)
        var keys: [ProtectionClass: SecureBytes] = [:]
        do {
            for (protectionClass, value) in sealed {
                keys[protectionClass] = try AESGCM.open(
                    AESGCM.SealedBox(combined: value), using: wrappingKey, authenticating: Self.binding(protectionClass)
                )
            }
        } catch {
            throw EnclaveError(.wrongPassword, "the keychain does not open with this passcode")
        }
        return (keys, wrappingKey)
    }

    /// Seals a new key for `protectionClass` under the wrapping key `open` returned.
    mutating func add(_ key: SecureBytes, for protectionClass: ProtectionClass, wrappingKey: SecureBytes) throws {
        sealed[protectionClass] = try AESGCM.seal(
            key, using: wrappingKey, authenticating: Self.binding(protectionClass)
        ).combined
    }

    /// HKDF-SHA256 over the root key, scrypt(passcode) and (TPM backend) the TPM-held secret: no part alone opens
    /// the class keys.
    private static func wrappingKey(
        stretched: SecureBytes, rootKey: SecureBytes, tpmSecret: SecureBytes?
    ) throws -> SecureBytes {
        guard let tpmSecret else {
            return try HKDFSHA256.deriveKey(
                inputKeyMaterial: rootKey.appending(stretched), info: Data("la.keybag.passcode-wrapping.v3".utf8),
                outputByteCount: 32)
        }
        return try HKDFSHA256.deriveKey(
            inputKeyMaterial: rootKey.appending(stretched).appending(tpmSecret),
            info: Data("la.keybag.passcode-wrapping.v3.tpm".utf8), outputByteCount: 32)
    }

    /// The TPM object's authorization value: derived from the stretched passcode, so the TPM checks the passcode
    /// (and counts a wrong one) without ever seeing it.
    private static func tpmAuthorization(_ stretched: SecureBytes) throws -> SecureBytes {
        try HKDFSHA256.deriveKey(
            inputKeyMaterial: stretched, info: Data("la.keybag.passcode-tpm-authorization.v3".utf8), outputByteCount: 32
        )
    }

    /// Runs `body` on a connection to `tpm`, reporting a refused authorization as a wrong passcode and a lockout
    /// as such (with the TPM's own numbers).
    private static func using<Result>(_ tpm: TPM, _ body: (TPMConnection) throws -> Result) throws -> Result {
        do {
            return try tpm.withConnection { connection in
                do {
                    return try body(connection)
                } catch let error as TPMError where error.isLockout {
                    let state = try? connection.dictionaryAttackState()
                    let wait = state.map { ", and forgets one failure every \($0.recoverySeconds) s" } ?? ""
                    throw EnclaveError(
                        .lockedOut,
                        "the TPM refuses passcode attempts after too many wrong ones (dictionary-attack lockout\(wait))"
                    )
                }
            }
        } catch let error as TPMError where error.isAuthorizationFailure {
            throw EnclaveError(.wrongPassword, "the keychain does not open with this passcode")
        } catch let error as TPMError {
            throw RootKeyStore.enclaveError(error, tpm: tpm)
        }
    }

    private static func binding(_ protectionClass: ProtectionClass) -> Data {
        Data("la.keybag.v3:passcode:\(protectionClass.rawValue)".utf8)
    }
}

extension PasscodeProtection {
    // MARK: Keybag entries

    /// The keybag entries holding this layer: `passcode-kdf`, `pc:<class>` and (TPM) `passcode-tpm`.
    var entries: [String: Data] {
        var out: [String: Data] = [:]
        // PasswordKDF is a plain Codable of numbers and a salt: encoding cannot fail.
        out["passcode-kdf"] = (try? JSONEncoder().encode(kdf)) ?? Data()
        for (protectionClass, value) in sealed { out["pc:" + protectionClass.rawValue] = value }
        if let tpmSecret { out["passcode-tpm"] = tpmSecret }
        return out
    }

    /// The names of every entry this layer may have.
    static let entryNames = ["passcode-kdf", "passcode-tpm"] + classes.map { "pc:" + $0.rawValue }

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
                // Only the akpu key may be missing (destroyed when the passcode became unusable).
                if protectionClass == .whenPasscodeSetThisDeviceOnly { continue }
                throw EnclaveError(.corrupt, "the keybag does not hold every passcode-protected key")
            }
            sealed[protectionClass] = value
        }
        self.init(kdf: kdf, sealed: sealed, tpmSecret: entries["passcode-tpm"])
    }
}

/// The authorizations a keybag's passcode TPM object refused, remembered in memory (zeroizing) for the life of an
/// ``Enclave``. The object's authorization never changes, so a passcode it refused once it refuses always; trying
/// it again only counts towards the TPM's dictionary-attack lockout, which locks every dictionary-attack-protected
/// object on the machine, other users' included. When the account's passcode changed with `passwd`, PAM accepts the
/// new one and the keybag does not: a screen lock or a login retried in a loop would otherwise reach the lockout.
/// Keyed by the TPM object, so a keybag sealed anew starts with nothing refused. Nothing is written: a new process
/// tries again. What is kept (an HKDF of scrypt(passcode), 32 MiB per guess to test a guess against) tells a reader
/// of this process's memory less than the passcode itself, which the same memory held while it was checked.
final class RefusedAuthorizations: Sendable {
    private let refused = Mutex<[(object: Data, authorization: SecureBytes)]>([])
    /// How many are kept (the oldest goes first).
    private static let limit = 8

    func contains(_ authorization: SecureBytes, for object: Data) -> Bool {
        refused.withLock { entries in entries.contains { $0.object == object && $0.authorization == authorization } }
    }

    func add(_ authorization: SecureBytes, for object: Data) {
        refused.withLock { entries in
            entries.append((object, authorization))
            if entries.count > Self.limit { entries.removeFirst() }
        }
    }
}
