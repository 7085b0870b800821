import ArgumentParser
import EmbeddedEngine
import Foundation
import SecurityClient
import SecurityProtocol
import SocketPeer
import StoreFiles

/// `lactl status`: which engine this user's programs talk to and what it has.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show the mode (embedded or localauthd), the socket or store, the reader, enrolled prints, lock state and lockout.",
        discussion: """
            The mode comes from LA_DAEMON_SOCKET, then $XDG_CONFIG_HOME/local-authentication/client.conf, then
            /etc/local-authentication/client.conf; embedded when none names a socket.
            """)

    func run() async throws {
        let mode = ClientSelection.mode()
        switch mode {
        case .embedded:
            print("mode: embedded (the engine runs inside each program)")
            print("store: \(DataLocations.dataDirectory(ProcessInfo.processInfo.environment).path)")
            checkPAMService()
        case .daemon(let socket):
            print("mode: daemon (localauthd)")
            print("socket: \(socket)")
            print("store: the daemon's, for uid \(getuid())")
        }
        let client: any SecurityClient
        do {
            client = try ClientSelection.fromEnvironment()
        } catch let status as KeychainStatus {
            print("state: unavailable: \(status.message)")
            throw ExitCode(1)
        }
        if case .caller(let caller)? = try? await client.send(.callerIdentity) {
            for line in WhoAmI.lines(caller) { print(line) }
        }
        if case .locked(let locked) = try? await client.send(.lockState) {
            print("keychain: \(locked ? "locked" : "unlocked")")
            if case .sealedUnderPasscode(let sealed) = try? await client.send(.sealingState) {
                print(
                    sealed
                        ? "keychain sealing: under the passcode (locked means the class keys are gone)"
                        : "keychain sealing: not yet under the passcode (the lock is a flag in the store's state file,"
                            + " which protects nothing against whoever can write it); 'lactl keychain unlock' seals it")
            }
        }
        if case .reader(let reader)? = try? await client.send(.reader) {
            if reader.driver == "fprintd" {
                print(
                    "reader: \(reader.name) (through fprintd, device \(reader.deviceID), "
                        + "\(reader.enrollStages) enrollment scans)")
            } else {
                print(
                    "reader: \(reader.name) (libfprint driver \(reader.driver), "
                        + "\(reader.enrollStages) enrollment scans)")
            }
        } else {
            print("reader: none usable")
        }
        _ = try? await client.send(.closeReader)
        if case .prints(let prints, _)? = try? await client.send(.enrolledPrints) {
            print(
                "enrolled prints: \(prints.count)\(prints.isEmpty ? "" : " (" + prints.map(\.finger.description).joined(separator: ", ") + ")")"
            )
        }
        if case .environment(let environment)? = try? await client.send(.environment) {
            print(
                "passcode: \(environment.passcodeSet ? "set (PAM can authenticate this user)" : "not usable through PAM")"
            )
            print("fingerprint lockout: \(environment.lockedOut ? "yes, until a passcode success" : "no")")
        }
        print("user namespaces: \(UserNamespacePolicy.current().summary)")
    }

    /// Says the one command that fixes a missing PAM service file.
    private func checkPAMService() {
        let environment = ProcessInfo.processInfo.environment
        let service = environment["LA_PAM_SERVICE"].flatMap { $0.isEmpty ? nil : $0 } ?? "local-authentication"
        let directory = environment["LA_PAM_CONFDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/etc/pam.d"
        let file = directory + "/" + service
        if FileManager.default.fileExists(atPath: file) {
            print("PAM service: \(file)")
        } else {
            print("PAM service: \(file) is missing; fix with: sudo make install (from the source tree)")
        }
    }
}

/// `lactl whoami`: who the engine takes this program for.
struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "whoami",
        abstract: "Show who the engine takes lactl for: user, process, executable, application and access groups.",
        discussion: """
            In daemon mode this is what localauthd found from the kernel (SO_PEERCRED, the process's executable) and
            its app registry; in embedded mode nothing checks it, and the groups are what the configuration names.
            """)

    func run() async throws {
        let client = try ClientSelection.fromEnvironment()
        guard case .caller(let caller) = try await client.send(.callerIdentity) else { throw ExitCode(1) }
        for line in Self.lines(caller) { print(line) }
    }

    static func lines(_ caller: CallerInfo) -> [String] {
        var lines = [
            "user: \(caller.userName) (uid \(caller.uid))",
            "process: \(caller.pid), \(caller.executable)",
        ]
        if let digest = caller.executableDigest {
            lines.append("executable sha256: \(digest.hexString)")
        }
        if let application = caller.applicationIdentifier {
            lines.append("application: \(application) (registered in \(caller.registrationFile ?? "?"))")
        } else if caller.mode == "daemon" {
            lines.append("application: not registered (a private access group of its own)")
        } else {
            lines.append("application: unchecked (embedded mode: the groups are what the configuration names)")
        }
        lines.append("access groups: \(caller.accessGroups.joined(separator: ", "))")
        if caller.mayAccessAllGroups { lines.append("may act in: every access group of this user (administrative)") }
        if let enclave = caller.enclave { lines.append("keys: \(enclave)") }
        return lines
    }
}
