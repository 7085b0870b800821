import Foundation
import SecureCrypto
import Synchronization
import TrustedPlatform

/// A P-256 private key that lives in the enclave, in the only form that ever leaves it: its scalar sealed with
/// AES-256-GCM under the device root key, the associated data binding the key's access-control list and its public
/// key. Changing any byte (the sealed scalar, the list, the public key) makes the key fail to open.
///
/// A key whose list has `.applicationPassword` is sealed under a key derived from the root key *and* the
/// application password (scrypt of the password, with its parameters kept in ``passwordKDF`` and bound too): the
/// right password is part of the key itself, not a check beside it, so a wrong one opens nothing.
///
/// On the TPM backend the key is made inside the TPM and its private part never leaves it: the value holds the TPM's
/// key object (public area and TPM-encrypted private area) instead of a sealed scalar. The object's authorization
/// value is derived from the store's keys, the access-control list and the password parameters (and, for a
/// password-bound key, the password): a changed list, a key from another store or a wrong password gives a value
/// the TPM refuses.
///
/// Whoever holds this value can ask the enclave to use the key but cannot read it; the engine checks the
/// access-control list before it asks the enclave to open the key.
package struct EnclaveKey: Sendable, Hashable {
    /// The canonical encoding of the key's access-control list (empty when the key has none).
    package var accessControl: Data
    /// The public key, `04 || X || Y` (65 bytes).
    package var publicKey: Data
    /// The private scalar sealed under the root key (nonce, ciphertext, tag).
    package var sealedScalar: Data
    /// For a key bound to an application password: the scrypt parameters (JSON of `PasswordKDF`); else empty.
    package var passwordKDF: Data
    /// For a TPM-held key: the TPM's key object (`TPMObject.serialized`); empty for a software key.
    package var tpmObject: Data

    private static let magic = Data("LAEK1".utf8)
    private static let passwordMagic = Data("LAEK2".utf8)
    private static let tpmMagic = Data("LAEK3".utf8)

    package init(
        accessControl: Data, publicKey: Data, sealedScalar: Data, passwordKDF: Data = Data(), tpmObject: Data = Data()
    ) {
        self.accessControl = accessControl
        self.publicKey = publicKey
        self.sealedScalar = sealedScalar
        self.passwordKDF = passwordKDF
        self.tpmObject = tpmObject
    }

    /// Whether the private key is inside a TPM.
    package var isTPMHeld: Bool { !tpmObject.isEmpty }

    /// The bytes stored as the key item's data and held by a client's `SecKey` as its handle (keys without an
    /// application password keep the first format byte for byte). A TPM-held key: `LAEK3`, the list, the public
    /// key, the password parameters (empty for none), the TPM object.
    package var serialized: Data {
        if isTPMHeld {
            var out = Self.tpmMagic
            for field in [accessControl, publicKey, passwordKDF, tpmObject] { Self.appendField(field, to: &out) }
            return out
        }
        var out = passwordKDF.isEmpty ? Self.magic : Self.passwordMagic
        Self.appendField(accessControl, to: &out)
        Self.appendField(publicKey, to: &out)
        if !passwordKDF.isEmpty { Self.appendField(passwordKDF, to: &out) }
        Self.appendField(sealedScalar, to: &out)
        return out
    }

    /// Parses `serialized`'s output. - Throws: `EnclaveError.corrupt` for anything else.
    package init(serialized data: Data) throws {
        let bytes = [UInt8](data)
        guard bytes.count >= Self.magic.count else { throw EnclaveError(.corrupt, "not an enclave key") }
        let magic = Data(bytes[0..<Self.magic.count])
        guard magic == Self.magic || magic == Self.passwordMagic || magic == Self.tpmMagic else {
            throw EnclaveError(.corrupt, "not an enclave key")
        }
        var offset = Self.magic.count
        func field() throws -> Data {
            guard offset + 4 <= bytes.count else { throw EnclaveError(.corrupt, "an enclave key is truncated") }
            let count = bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
            guard count <= bytes.count - offset - 4 else { throw EnclaveError(.corrupt, "an enclave key is truncated") }
            defer { offset += 4 + count }
            return Data(bytes[(offset + 4)..<(offset + 4 + count)])
        }
        accessControl = try field()
        publicKey = try field()
        passwordKDF = magic != Self.magic ? try field() : Data()
        if magic == Self.tpmMagic {
            tpmObject = try field()
            sealedScalar = Data()
        } else {
            sealedScalar = try field()
            tpmObject = Data()
        }
        guard offset == bytes.count, publicKey.count == P256.publicKeyByteCount,
            magic != Self.passwordMagic || !passwordKDF.isEmpty, magic != Self.tpmMagic || !tpmObject.isEmpty
        else {
            throw EnclaveError(.corrupt, "an enclave key has trailing or missing bytes")
        }
    }

    /// The associated data of the sealed scalar: a label, the access-control list, the public key and, for a
    /// password-bound key, its KDF parameters.
    var binding: Data {
        if isTPMHeld { return Self.tpmBinding(accessControl: accessControl, passwordKDF: passwordKDF) }
        var out = Data((passwordKDF.isEmpty ? "la.enclave-key.v1" : "la.enclave-key.v2").utf8)
        Self.appendField(accessControl, to: &out)
        Self.appendField(publicKey, to: &out)
        if !passwordKDF.isEmpty { Self.appendField(passwordKDF, to: &out) }
        return out
    }

    /// What a TPM-held key's authorization value is derived from. The public key is not in it (the TPM chooses it
    /// after the value is set); it is checked against the TPM object's own public area instead.
    static func tpmBinding(accessControl: Data, passwordKDF: Data) -> Data {
        var out = Data("la.enclave-key.v3".utf8)
        appendField(accessControl, to: &out)
        appendField(passwordKDF, to: &out)
        return out
    }

    private static func appendField(_ field: Data, to out: inout Data) {
        let count = UInt32(field.count)
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: count >> shift)) }
        out.append(field)
    }
}

/// Opened enclave keys, by their sealed form, so repeated operations with one key do not open and re-check it each
/// time. Only a key that opened (authenticated under the root key) is ever entered, under its exact sealed bytes,
/// so a changed list or scalar never finds an entry. The keys stay inside the enclave object; the engine still
/// checks the access-control list before every use.
final class EnclaveKeyCache: Sendable {
    private static let capacity = 64
    private let keys = Mutex<[EnclaveKey: P256.PrivateKey]>([:])

    func key(for sealed: EnclaveKey) -> P256.PrivateKey? {
        keys.withLock { $0[sealed] }
    }

    func insert(_ key: P256.PrivateKey, for sealed: EnclaveKey) {
        keys.withLock { keys in
            if keys.count >= Self.capacity { keys.removeAll() }
            keys[sealed] = key
        }
    }
}

extension Enclave {
    /// Generates a P-256 key inside the enclave, bound to `accessControl` (the list's canonical bytes, empty for
    /// none) and, when `password` is given, to that application password. The private scalar exists in clear only
    /// in this process's secure memory, never in the result.
    ///
    /// On the TPM backend the key is made inside the TPM, and its scalar never exists outside it.
    ///
    /// - Throws: `EnclaveError.corrupt` / `.io` when the root key cannot be read or the TPM fails.
    package func generateKey(accessControl: Data, password: SecureBytes? = nil) throws -> EnclaveKey {
        if case .tpm(let tpm) = backend {
            let kdf = password == nil ? Data() : try JSONEncoder().encode(Self.passwordKDF())
            let authorization = try tpmAuthorization(
                EnclaveKey.tpmBinding(accessControl: accessControl, passwordKDF: kdf), password: password, kdf: kdf)
            let (object, publicKey) = try TPMHeldKey.call(tpm, passwordBound: password != nil) {
                try $0.createP256Key(authorization: authorization)
            }
            return EnclaveKey(
                accessControl: accessControl, publicKey: publicKey, sealedScalar: Data(), passwordKDF: kdf,
                tpmObject: object.serialized)
        }
        let key = try P256.PrivateKey()
        let scalar = key.x963Representation.slice(P256.publicKeyByteCount..<P256.privateKeyByteCount)
        var sealed = EnclaveKey(
            accessControl: accessControl, publicKey: key.publicKey.x963Representation, sealedScalar: Data())
        var sealingKey = try rootKey()
        if let password {
            let kdf = try Self.passwordKDF()
            sealed.passwordKDF = try JSONEncoder().encode(kdf)
            sealingKey = try Self.passwordSealingKey(rootKey: sealingKey, password: password, kdf: kdf)
        }
        sealed.sealedScalar = try AESGCM.seal(scalar, using: sealingKey, authenticating: sealed.binding).combined
        if password == nil { keyCache.insert(key, for: sealed) }
        return sealed
    }

    /// Runs `body` with the opened private key of `sealed`. The caller (the engine) must have checked the key's
    /// access-control list first; a password-bound key opens only with its `password`, every time (it is never
    /// cached, so a later call with another password cannot reuse it).
    ///
    /// A TPM-held key is handed to `body` as a reference to the TPM object: each operation loads it into the TPM
    /// with its authorization value and runs there.
    ///
    /// - Throws: `EnclaveError.wrongPassword` for a password-bound key without its password; `.corrupt` when the
    ///   key does not open under this device's root key (a changed byte in the scalar, the list or the public key,
    ///   or a key from another device or TPM); whatever `body` throws.
    package func withPrivateKey<Result>(
        _ sealed: EnclaveKey, password: SecureBytes? = nil, _ body: (any P256PrivateKeyOperations) throws -> Result
    ) throws -> Result {
        let bound = !sealed.passwordKDF.isEmpty
        if sealed.isTPMHeld {
            let held = try tpmHeldKey(sealed, password: password)
            return try TPMHeldKey.use(
                held.object, tpm: held.tpm, authorization: held.authorization, passwordBound: bound, body)
        }
        if !bound, let key = keyCache.key(for: sealed) { return try body(key) }
        var sealingKey = try rootKey()
        if bound {
            guard let password,
                let kdf = try? JSONDecoder().decode(PasswordKDF.self, from: sealed.passwordKDF),
                kdf == (try? Self.passwordKDF(salt: kdf.salt))
            else {
                throw EnclaveError(.wrongPassword, "the key needs its application password")
            }
            sealingKey = try Self.passwordSealingKey(rootKey: sealingKey, password: password, kdf: kdf)
        }
        let key: P256.PrivateKey
        do {
            let scalar = try AESGCM.open(
                AESGCM.SealedBox(combined: sealed.sealedScalar), using: sealingKey, authenticating: sealed.binding)
            key = try P256.PrivateKey(x963Representation: SecureBytes(sealed.publicKey).appending(scalar))
        } catch let error as EnclaveError where error.code == .io {
            throw error
        } catch {
            if bound { throw EnclaveError(.wrongPassword, "the application password does not open the key") }
            throw EnclaveError(.corrupt, "an enclave key does not open on this device")
        }
        if !bound { keyCache.insert(key, for: sealed) }
        return try body(key)
    }

    /// A TPM-held key's object and authorization value, after the checks every use makes: the store is on a TPM,
    /// the object is the key's, and a password-bound key has our parameters and a password.
    ///
    /// - Throws: `EnclaveError.corrupt` / `.wrongPassword` as `withPrivateKey`.
    func tpmHeldKey(
        _ sealed: EnclaveKey, password: SecureBytes?
    ) throws -> (tpm: TPM, object: TPMObject, authorization: SecureBytes) {
        guard case .tpm(let tpm) = backend else {
            throw EnclaveError(.corrupt, "the key is held by a TPM this store does not use")
        }
        guard let object = try? TPMObject(serialized: sealed.tpmObject), object.p256PublicKey == sealed.publicKey
        else {
            throw EnclaveError(.corrupt, "an enclave key's TPM object does not match its public key")
        }
        var password = password
        if !sealed.passwordKDF.isEmpty {
            guard let kdf = try? JSONDecoder().decode(PasswordKDF.self, from: sealed.passwordKDF),
                kdf == (try? Self.passwordKDF(salt: kdf.salt))
            else {
                throw EnclaveError(.corrupt, "an enclave key's password parameters are not ours")
            }
            guard password != nil else {
                throw EnclaveError(.wrongPassword, "the key needs its application password")
            }
        } else {
            password = nil
        }
        let authorization = try tpmAuthorization(sealed.binding, password: password, kdf: sealed.passwordKDF)
        return (tpm, object, authorization)
    }

    /// The only password KDF a key is made with, and so the only one accepted from a handle (a client could
    /// otherwise hand in parameters that take minutes and gigabytes to derive): scrypt N = 2^14, r = 8, p = 1, a
    /// 16-byte salt, 32 bytes out.
    private static func passwordKDF(salt: Data? = nil) throws -> PasswordKDF {
        guard salt == nil || salt?.count == 16 else { throw EnclaveError(.corrupt, "bad password salt") }
        return try PasswordKDF.scrypt(cost: 1 << 14, blockSize: 8, parallelism: 1, outputByteCount: 32, salt: salt)
    }

    /// HKDF-SHA256 over the root key and the password-derived key: both are needed to open the scalar.
    private static func passwordSealingKey(rootKey: SecureBytes, password: SecureBytes, kdf: PasswordKDF) throws
        -> SecureBytes
    {
        let passwordKey = try kdf.deriveKey(from: password)
        return try HKDFSHA256.deriveKey(
            inputKeyMaterial: rootKey.appending(passwordKey), info: Data("la.enclave-key.password.v1".utf8),
            outputByteCount: 32)
    }

    private func rootKey() throws -> SecureBytes {
        try rootKeys.load()
    }

    /// A TPM-held key's authorization value: HKDF-SHA256 over the store's key-authorization key (and, for a
    /// password-bound key, the scrypt of the password), with the key's binding as info.
    private func tpmAuthorization(_ binding: Data, password: SecureBytes?, kdf: Data) throws -> SecureBytes {
        var material = keyAuthorizationKey
        if let password {
            let parameters = try JSONDecoder().decode(PasswordKDF.self, from: kdf)
            material = material.appending(try parameters.deriveKey(from: password))
        }
        return try HKDFSHA256.deriveKey(inputKeyMaterial: material, info: binding, outputByteCount: 32)
    }
}
