import Foundation
import SecureCrypto
import StoreFiles
import Synchronization
import TrustedPlatform

/// The keybag's encoding, the keys sealed in it, and the private files the enclave reads and writes.
extension Enclave {
    static func keybagBinding(_ name: String, version: Int) -> Data {
        Data("la.keybag.v\(version):\(name)".utf8)
    }

    static func seal(_ key: SecureBytes, name: String, rootKey: SecureBytes) throws -> Data {
        try AESGCM.seal(key, using: rootKey, authenticating: keybagBinding(name, version: keybagVersion)).combined
    }

    static func unwrap(
        _ wrapped: Data, name: String, version: Int = keybagVersion, rootKey: SecureBytes
    ) throws -> SecureBytes {
        do {
            return try AESGCM.open(
                AESGCM.SealedBox(combined: wrapped), using: rootKey,
                authenticating: keybagBinding(name, version: version))
        } catch {
            throw EnclaveError(.corrupt, "the keybag does not open with this device key")
        }
    }

    /// Version 3: `LAKB3`, then per entry its name (a one-byte size) and value (a two-byte size, big-endian).
    static func encodeKeybag(_ wrapped: [String: Data]) -> Data {
        var out = Data("LAKB\(keybagVersion)".utf8)
        for name in wrapped.keys.sorted() {
            let nameBytes = Data(name.utf8)
            let value = wrapped[name]!
            out.append(UInt8(nameBytes.count))
            out.append(nameBytes)
            out.append(contentsOf: [UInt8(value.count >> 8), UInt8(value.count & 0xFF)])
            out.append(value)
        }
        return out
    }

    /// The keybag's version (1, 2 or 3, from its magic) and its entries by name. Versions 1 and 2 size values in
    /// one byte.
    static func decodeKeybag(_ data: Data) throws -> (Int, [String: Data]) {
        let bytes = [UInt8](data)
        guard bytes.count >= 5, Data(bytes[0..<4]) == Data("LAKB".utf8),
            (UInt8(ascii: "1")...UInt8(ascii: "3")).contains(bytes[4])
        else {
            throw EnclaveError(.corrupt, "the keybag file is not a keybag")
        }
        let version = Int(bytes[4] - UInt8(ascii: "0"))
        var result: [String: Data] = [:]
        var offset = 5
        func field(sizeBytes: Int) throws -> Data {
            guard offset + sizeBytes <= bytes.count else {
                throw EnclaveError(.corrupt, "the keybag file is truncated")
            }
            let count = bytes[offset..<offset + sizeBytes].reduce(0) { $0 << 8 | Int($1) }
            guard offset + sizeBytes + count <= bytes.count else {
                throw EnclaveError(.corrupt, "the keybag file is truncated")
            }
            defer { offset += sizeBytes + count }
            return Data(bytes[(offset + sizeBytes)..<(offset + sizeBytes + count)])
        }
        while offset < bytes.count {
            let name = String(decoding: try field(sizeBytes: 1), as: UTF8.self)
            guard result.updateValue(try field(sizeBytes: version >= 3 ? 2 : 1), forKey: name) == nil else {
                throw EnclaveError(.corrupt, "the keybag names a key twice")
            }
        }
        return (version, result)
    }

    /// Checks that a current keybag holds exactly its keys: every class key under the root key, or (protected)
    /// `dk`/`dku` under the root key and the rest under the passcode.
    static func checkEntries(_ entries: [String: Data], protected: Bool) throws {
        var required = Set(keyNames)
        var optional: Set<String> = []
        if protected {
            required.subtract(PasscodeProtection.classes.map(\.rawValue))
            required.formUnion(PasscodeProtection.entryNames)
            // A TPM-held part only on the TPM backend; no akpu key while the passcode is unusable.
            optional = ["passcode-tpm", "pc:" + ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue]
            required.subtract(optional)
        }
        let names = Set(entries.keys)
        guard required.isSubset(of: names), names.isSubset(of: required.union(optional)) else {
            throw EnclaveError(.corrupt, "the keybag does not hold every key")
        }
    }

    /// The name a store's unlocked keys go by: its keybag's random identity and the directory's device and inode,
    /// so a copy of the directory (or another store) never finds them.
    static func identity(of directory: URL, id: SecureBytes) throws -> String {
        var info = stat()
        guard stat(directory.path, &info) == 0 else { throw EnclaveError(.io, "cannot read the store directory") }
        let digest = SHA256.hash(id.unprotectedData() + Data("\(info.st_dev):\(info.st_ino)".utf8))
        return digest.prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// Runs a store-file operation, reporting its failure as `EnclaveError.io`.
    static func files<Result: ~Copyable>(_ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch let failure as PrivateFileError {
            throw EnclaveError(.io, failure.message)
        }
    }

    static func createPrivateDirectory(_ directory: URL) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw EnclaveError(.io, "cannot create the store directory")
        }
        chmod(directory.path, 0o700)
    }

    static func readFile(_ path: String) throws -> Data {
        guard let data = try? PrivateFiles.read(path) else {
            throw EnclaveError(.io, "cannot read \((path as NSString).lastPathComponent)")
        }
        return data
    }

    /// Writes `data` to a fresh 0600 file and renames it over `path`, so readers see the old or the new file.
    static func writeFileAtomically(_ data: Data, to path: String) throws {
        try files { try PrivateFiles.writeAtomically(data, to: path) }
    }

    static func stamp(of path: String) -> FileStamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileStamp(info)
    }

    static func currentBootID() -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/sys/kernel/random/boot_id") else {
            return "unknown-boot"
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
