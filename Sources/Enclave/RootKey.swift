import Foundation
import SecureCrypto
import StoreFiles
import TrustedPlatform

/// Where a store's device root key lives, and how it is read back:
/// - software: `device.key`, the 256-bit key itself (0600);
/// - TPM: `device.tpm`, the key sealed into a data object under the TPM's storage root key (`LATPM1` and the
///   object's public and private areas). Only that TPM can unseal it, so a copied directory opens nowhere else.
struct RootKeyStore: Sendable {
    let directory: URL
    let backend: EnclaveBackend

    static let keyByteCount = 32
    private static let sealedMagic = Data("LATPM1".utf8)

    private var keyPath: String { Self.keyPath(in: directory) }
    private var sealedPath: String { Self.sealedPath(in: directory) }
    private static func keyPath(in directory: URL) -> String { directory.appendingPathComponent("device.key").path }
    private static func sealedPath(in directory: URL) -> String { directory.appendingPathComponent("device.tpm").path }

    /// Finds the store's root key (making it when `mayCreate`: a new store), moving a software key into the TPM
    /// when the configuration names the TPM explicitly (`tpm`, not `auto`). Runs under the enclave's lock.
    ///
    /// - Throws: `EnclaveError`: `.configuration` when the key is sealed to a TPM that is not configured or does not
    ///   answer, `.corrupt` when it is sealed to another TPM or the key file is damaged or missing.
    static func open(
        in directory: URL, configuration: EnclaveConfiguration, mayCreate: Bool
    ) throws -> (RootKeyStore, SecureBytes) {
        let sealedExists = PrivateFiles.exists(sealedPath(in: directory))
        let fileExists = PrivateFiles.exists(keyPath(in: directory))
        if sealedExists {
            guard configuration.choice != .software else {
                throw EnclaveError(
                    .configuration, "this store's device key is sealed to a TPM; open it with LA_ENCLAVE=tpm or auto")
            }
            let store = RootKeyStore(directory: directory, backend: .tpm(configuration.tpm))
            let key = try store.load()
            // A move into the TPM that stopped before the key file was gone: finish it.
            if fileExists { try store.destroyKeyFile(matching: key) }
            return (store, key)
        }
        if fileExists || !mayCreate {
            let software = RootKeyStore(directory: directory, backend: .software)
            let key = try software.load()
            // Only an explicit `tpm` moves a software store into the TPM: `auto` never ties an existing store to a
            // TPM nobody named (a cleared or replaced TPM would take the store with it).
            guard configuration.choice == .tpm else { return (software, key) }
            let tpm = configuration.tpm
            let sealed = RootKeyStore(directory: directory, backend: .tpm(tpm))
            try sealed.seal(key, tpm: tpm)
            try sealed.destroyKeyFile(matching: key)
            return (sealed, key)
        }
        let backend = configuration.backendForNewStore()
        let store = RootKeyStore(directory: directory, backend: backend)
        switch backend {
        case .software:
            let key = try Enclave.files { try PrivateFiles.loadOrCreateKey(at: store.keyPath, byteCount: keyByteCount) }
            return (store, key)
        case .tpm(let tpm):
            let key = try SecureBytes(randomCount: keyByteCount)
            try store.seal(key, tpm: tpm)
            return (store, key)
        }
    }

    /// The root key, read (software) or unsealed (TPM) afresh.
    func load() throws -> SecureBytes {
        switch backend {
        case .software:
            do {
                return try PrivateFiles.loadOrCreateKey(at: keyPath, byteCount: Self.keyByteCount, mayCreate: false)
            } catch let failure as PrivateFileError {
                throw EnclaveError(.corrupt, "the device key cannot be used: \(failure.message)")
            }
        case .tpm(let tpm):
            let data = try Enclave.readFile(sealedPath)
            guard data.starts(with: Self.sealedMagic),
                let object = try? TPMObject(serialized: data.dropFirst(Self.sealedMagic.count))
            else {
                throw EnclaveError(.corrupt, "device.tpm is not a sealed device key")
            }
            let key: SecureBytes
            do {
                key = try tpm.withConnection { try $0.unseal(object, authorization: SecureBytes(zeros: 0)) }
            } catch let error as TPMError {
                throw Self.enclaveError(error, tpm: tpm)
            }
            guard key.count == Self.keyByteCount else {
                throw EnclaveError(.corrupt, "the sealed device key is not a key")
            }
            return key
        }
    }

    private func seal(_ key: SecureBytes, tpm: TPM) throws {
        let object: TPMObject
        do {
            object = try tpm.withConnection { try $0.seal(key, authorization: SecureBytes(zeros: 0)) }
        } catch let error as TPMError {
            throw Self.enclaveError(error, tpm: tpm)
        }
        try Enclave.writeFileAtomically(Self.sealedMagic + object.serialized, to: sealedPath)
        // Never trust a seal that was not read back: the key file goes only once the TPM returns the same key.
        guard try load() == key else { throw EnclaveError(.corrupt, "the TPM returned another key than it sealed") }
    }

    /// Overwrites `device.key` with zeros and removes it, once the TPM holds the same key. (On copy-on-write or
    /// wear-levelled storage the old blocks may survive; the README says so.)
    private func destroyKeyFile(matching key: SecureBytes) throws {
        if let old = try? PrivateFiles.readSecret(keyPath, expectedCount: Self.keyByteCount), old != key {
            throw EnclaveError(.corrupt, "device.key and device.tpm hold different keys")
        }
        try Enclave.files {
            try PrivateFiles.overwrite(Data(count: Self.keyByteCount), at: keyPath)
            try PrivateFiles.remove(keyPath)
        }
    }

    static func enclaveError(_ error: TPMError, tpm: TPM) -> EnclaveError {
        if error.isForeignObject {
            return EnclaveError(
                .corrupt, "the device key is sealed to another TPM: this store opens only where it was made")
        }
        if error.responseCode == nil {
            return EnclaveError(
                .configuration, "the store needs its TPM, which does not answer at \(tpm.tcti) (\(error))")
        }
        return EnclaveError(.io, "\(error)")
    }
}
