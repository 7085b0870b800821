import Foundation
import SecurityProtocol
import StoreFiles

#if canImport(Glibc)
    import Glibc
#endif

/// Backup files on the calling program's side. The engine seals and opens backups as bytes
/// (``KeychainRequest/exportBackup(password:)``, ``KeychainRequest/importBackup(contents:password:)``); the program
/// writes and reads the file with its own rights, so `localauthd` never opens a path a caller names.
package enum BackupFiles {
    /// The largest backup: what fits in one message with room for the request around it (a keychain of a hundred
    /// thousand small items exports to a few tens of MiB).
    package static let maximumByteCount = MessageLimits.default.maximumFrameByteCount - (64 << 10)

    /// Replaces `file` with `contents`, mode 0600, through an exclusive temporary beside it renamed over it: a
    /// link planted at any name there is never written through.
    ///
    /// - Throws: `KeychainStatus(.io)` when the file cannot be written.
    package static func write(_ contents: Data, to file: URL) throws {
        do {
            try PrivateFiles.writeAtomically(contents, to: file.path)
        } catch {
            throw KeychainStatus(.io, "cannot write the backup file \(file.path)")
        }
    }

    /// The contents of the backup `file`, checked to be a regular file no larger than ``maximumByteCount`` before
    /// anything is read.
    ///
    /// - Throws: `KeychainStatus(.io)` when it cannot be read, `.decode` when it is larger than any backup.
    package static func read(_ file: URL) throws -> Data {
        let fd = open(file.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw KeychainStatus(.io, "cannot read the backup file \(file.path)") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw KeychainStatus(.io, "the backup \(file.path) is not a regular file")
        }
        guard info.st_size <= maximumByteCount else {
            throw KeychainStatus(.decode, "the file \(file.path) is larger than any backup this keychain writes")
        }
        do {
            let contents = try handle.readToEnd() ?? Data()
            guard contents.count <= maximumByteCount else {
                throw KeychainStatus(.decode, "the file \(file.path) is larger than any backup this keychain writes")
            }
            return contents
        } catch let status as KeychainStatus {
            throw status
        } catch {
            throw KeychainStatus(.io, "cannot read the backup file \(file.path)")
        }
    }
}
