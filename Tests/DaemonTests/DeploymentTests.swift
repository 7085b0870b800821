import Foundation
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "localauthd", item 7: what `make install` puts in place works as systemd would run it.
@Suite("localauthd deployment", .serialized)
struct DeploymentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Issue 49: the package's second `pam-auth-update` profile, run through Debian's real `pam-auth-update` on
    /// copies of this machine's PAM files (a mount namespace of its own; the machine's are never touched): enabled
    /// with the login keychain's, `pam_localauth.so finger` comes first in common-auth, then pam_unix with
    /// `try_first_pass` (so a typed password reaches it), jumps counted past it, and the keychain's optional line
    /// after the stack's end.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/pam-auth-update")))
    func theFingerProfilePutsTheModuleBeforePamUnix() throws {
        let directory = try FileManager.default.url(
            for: .itemReplacementDirectory, in: .userDomainMask, appropriateFor: URL(fileURLWithPath: "/tmp"),
            create: true
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = """
            set -e
            d="$1"; profiles="$2"
            mkdir -p "$d/pam.d" "$d/configs" "$d/lib"
            cp -a /etc/pam.d/. "$d/pam.d/"
            cp -a /usr/share/pam-configs/. "$d/configs/"
            cp "$profiles/localauth" "$profiles/localauth-finger" "$d/configs/"
            cp -a /var/lib/pam/. "$d/lib/" 2>/dev/null || true
            exec unshare --mount --propagation private /bin/sh -c '
                mount --bind "$0/pam.d" /etc/pam.d && mount --bind "$0/configs" /usr/share/pam-configs &&
                mount --bind "$0/lib" /var/lib/pam &&
                DEBIAN_FRONTEND=noninteractive pam-auth-update --enable localauth localauth-finger &&
                grep "^auth" /etc/pam.d/common-auth' "$d"
            """
        let (status, output) = try runCapturingOutput(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", script, "sh", directory, Self.root.appendingPathComponent("Resources/pam-configs").path])
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n").map {
            $0.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        let finger = lines.firstIndex(of: "auth [success=2 default=ignore] pam_localauth.so finger")
        let unix = lines.firstIndex(of: "auth [success=1 default=ignore] pam_unix.so nullok try_first_pass")
        let keychain = lines.firstIndex(of: "auth optional pam_localauth.so")
        #expect(finger == 0, "the finger first: \(lines)")
        #expect(unix == 1, "then pam_unix, taking the typed password: \(lines)")
        #expect(keychain != nil && keychain! > 2, "the keychain's line after the stack's end: \(lines)")
        let host = try String(contentsOfFile: "/etc/pam.d/common-auth", encoding: .utf8)
        #expect(!host.contains("finger"), "this machine's common-auth is untouched")
    }

    /// systemd's own checker accepts both units as `make install` writes them.
    @Test func theSystemdUnitsVerify() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try builtExecutable("localauthd")
        let service = try String(
            contentsOf: Self.root.appendingPathComponent("Resources/systemd/localauthd.service"), encoding: .utf8
        )
        .replacingOccurrences(of: "@SBINDIR@", with: daemon.deletingLastPathComponent().path)
        try service.write(to: directory.appendingPathComponent("localauthd.service"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(
            at: Self.root.appendingPathComponent("Resources/systemd/localauthd.socket"),
            to: directory.appendingPathComponent("localauthd.socket"))
        let (status, output) = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/systemd-analyze"),
            [
                // The man pages the units name are checked by scripts/check-installables (the host has none).
                "verify", "--man=no", directory.appendingPathComponent("localauthd.service").path,
                directory.appendingPathComponent("localauthd.socket").path,
            ])
        #expect(status == 0, "\(output)")
        #expect(output.isEmpty, "\(output)")
    }

    /// The user units `make install` and the package lay out (the screen-lock watcher, the prompt agent, the SSH
    /// agent, the Secret Service provider, the FIDO security key) pass systemd's checker as user units: their syntax and that `ExecStart` names an executable.
    @Test func theUserUnitsVerify() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("user-units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bin = try lactlExecutable().deletingLastPathComponent().path
        var units: [String] = []
        for name in [
            "localauthd-screen-lock.service", "localauthd-agent.service", "lactl-ssh-agent.service",
            "lactl-secret-service.service", "lactl-fido.service",
        ] {
            let text = try String(
                contentsOf: Self.root.appendingPathComponent("Resources/systemd/user/\(name)"), encoding: .utf8)
            #expect(text.contains("@BINDIR@/lactl"), "\(name) runs lactl from BINDIR")
            let unit = directory.appendingPathComponent(name)
            try text.replacingOccurrences(of: "@BINDIR@", with: bin).write(to: unit, atomically: true, encoding: .utf8)
            units.append(unit.path)
        }
        // The checker's user mode wants a runtime directory; no user manager needs to run.
        let runtime = directory.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(
            at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let (status, output) = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/systemd-analyze"), ["verify", "--user", "--man=no"] + units,
            environment: inheritedEnvironment(merging: ["XDG_RUNTIME_DIR": runtime.path]))
        #expect(status == 0, "\(output)")
        #expect(output.isEmpty, "\(output)")
    }

    /// Socket activation: systemd's launcher holds the listening socket and starts the daemon on the first
    /// connection with the socket as descriptor 3 (`LISTEN_FDS`); the client is served on it.
    @Test func aSocketPassedBySystemdIsServed() async throws {
        var template = Array("/tmp/la-activate-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/activated.sock"
        // Another --socket path: the daemon must serve the descriptor it was given, not bind a socket of its own.
        let launcher = try SpawnedProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "-l", socket, try builtExecutable("localauthd").path, "--socket", directory + "/not-bound.sock",
                "--state-directory", directory + "/state",
            ], log: directory + "/launcher.log")
        defer { launcher.stop(SIGKILL) }
        var client: SocketClient?
        let deadline = Date().addingTimeInterval(20)
        while client == nil, Date() < deadline {
            client = try? SocketClient(path: socket, accessGroups: ["test.activation"])
            if client == nil { usleep(50_000) }
        }
        let connected = try #require(client)
        _ = try await connected.send(.add(genericPassword("activated", data: "yes")))
        #expect(try await foundPassword(connected, "activated") == "yes")
        #expect(!FileManager.default.fileExists(atPath: directory + "/not-bound.sock"))
        // systemd stops the service with SIGTERM: it ends gracefully.
        let stopped = launcher.stop(SIGTERM)
        #expect(!stopped.bySignal && stopped.status == 0)
    }
}
