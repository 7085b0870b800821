import Foundation
import StoreFiles

/// A TPM 2.0 reached through one TCTI, and the rule for sharing it.
///
/// The kernel's resource manager (`/dev/tpmrm0`) gives every connection a TPM of its own and flushes what a dead
/// process left loaded. Anything else (`/dev/tpm0`, swtpm) holds three transient objects for everyone: there, each
/// connection holds a lock (a `flock` beside swtpm's socket, else in `/tmp`) and starts by flushing what a killed
/// holder left behind.
package struct TPM: Sendable, Hashable {
    /// The TCTI string (`device:/dev/tpmrm0`, `swtpm:path=…`, `swtpm:host=…,port=…`).
    package var tcti: String

    /// The kernel's resource-managed TPM device.
    package static let defaultTCTI = "device:/dev/tpmrm0"

    package init(tcti: String = TPM.defaultTCTI) {
        self.tcti = tcti
    }

    /// Whether connections share the TPM through the kernel's resource manager.
    package var hasResourceManager: Bool { tcti.hasPrefix("device:/dev/tpmrm") }

    /// Runs `body` on a connection of its own, closed (every object it loaded flushed) when `body` returns.
    ///
    /// - Throws: `TPMError` when the TPM cannot be reached or a command fails; whatever `body` throws.
    package func withConnection<Result>(_ body: (TPMConnection) throws -> Result) throws -> Result {
        var lock: FileLock?
        if !hasResourceManager {
            do {
                lock = try FileLock(path: lockPath)
            } catch let failure as PrivateFileError {
                throw TPMError(code: TPMError.lockFailed, operation: "share the TPM (\(failure.message))")
            }
        }
        defer { lock?.unlock() }
        let connection = try TPMConnection(tcti: tcti)
        defer { connection.close() }
        if !hasResourceManager { try connection.flushLeftovers() }
        return try body(connection)
    }

    /// Whether a TPM answers at `tcti` (it can be reached and reports its properties).
    package func answers() -> Bool {
        (try? withConnection { try $0.information() }) != nil
    }

    /// The lock every user of a TPM without resource manager takes: beside swtpm's Unix socket, else in `/tmp`.
    var lockPath: String {
        if tcti.hasPrefix("swtpm:"),
            let path = tcti.dropFirst(6).split(separator: ",").first(where: {
                $0.hasPrefix("path=")
            })
        {
            return String(path.dropFirst(5)) + ".lock"
        }
        let hash = tcti.utf8.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 }
        return "/tmp/localauth-tpm-\(getuid())-\(String(hash, radix: 16)).lock"
    }
}
