import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real TPM 2.0 for tests: Debian's `swtpm` on a state directory of its own, reached through the TCTI
/// `swtpm:path=<dir>/sock`. Each instance is a different TPM (its own seeds), so an object sealed by one does not
/// load into another. Stopped (and its state removed) when dropped.
package final class SoftwareTPM: @unchecked Sendable {
    /// The TCTI string tpm2-tss, tpm2-tools and `LA_TPM_TCTI` take.
    package let tcti: String
    /// The state directory (the TPM's seeds and NV memory).
    package let stateDirectory: URL
    private let process: SpawnedProcess

    /// Whether `swtpm` is installed (`scripts/bootstrap` installs it).
    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    private static let executable = "/usr/bin/swtpm"

    /// The CA that certified this TPM's endorsement key (`certified`): its root and intermediate certificates
    /// (PEM), made by `swtpm_localca` for this TPM alone.
    package let certificateAuthority: (root: URL, intermediate: URL)?

    /// Starts a fresh TPM and waits until it answers. `certified`: manufactured first (`scripts/manufacture-swtpm`)
    /// with an RSA-2048 endorsement key whose certificate (in NV index 0x01C00002) a throwaway local CA signs, as a
    /// TPM maker's CA signs a real TPM's; otherwise manufactured bare on first start (no certificate, faster).
    package init(certified: Bool = false) throws {
        stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "swtpm-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(
            at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        certificateAuthority = certified ? try Self.manufacture(stateDirectory) : nil
        let socket = stateDirectory.appendingPathComponent("sock").path
        tcti = "swtpm:path=\(socket)"
        process = try SpawnedProcess(
            Self.executable,
            [
                "socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory.path)",
                "--server", "type=unixio,path=\(socket)", "--ctrl", "type=unixio,path=\(socket).ctrl",
                "--flags", "not-need-init,startup-clear",
            ],
            log: stateDirectory.appendingPathComponent("swtpm.log").path)
        let deadline = Date().addingTimeInterval(20)
        while !Self.accepts(socket) {
            guard process.isRunning, Date() < deadline else {
                throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "swtpm did not start"])
            }
            usleep(20_000)
        }
    }

    deinit {
        _ = process.stop()
        try? FileManager.default.removeItem(at: stateDirectory)
    }

    /// Runs `scripts/manufacture-swtpm` (`swtpm_setup` with `swtpm_localca` on a CA directory of the TPM's own,
    /// never the system's `/var/lib/swtpm-localca`), as `make test`'s TPM pass does.
    private static func manufacture(_ directory: URL) throws -> (root: URL, intermediate: URL) {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/manufacture-swtpm")
        let log = directory.appendingPathComponent("setup.log").path
        let process = try SpawnedProcess(script.path, [directory.path], log: log)
        guard let ended = process.wait(timeout: 60), ended == (0, false) else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "swtpm_setup failed; see \(log)"])
        }
        let ca = directory.appendingPathComponent("ca", isDirectory: true)
        return (ca.appendingPathComponent("swtpm-localca-rootca-cert.pem"), ca.appendingPathComponent("issuercert.pem"))
    }

    /// The environment that puts an engine on this TPM.
    package var environment: [String: String] { ["LA_ENCLAVE": "tpm", "LA_TPM_TCTI": tcti] }

    private static func accepts(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}

/// Whether this test run puts engines on the TPM backend (`scripts/run-tests tpm`: `LA_ENCLAVE=tpm`).
package var testsRunOnTPM: Bool { ProcessInfo.processInfo.environment["LA_ENCLAVE"] == "tpm" }

/// The store file that holds the device root key in this run: `device.tpm` (sealed to the TPM) or `device.key`.
package var rootKeyFileName: String { testsRunOnTPM ? "device.tpm" : "device.key" }
