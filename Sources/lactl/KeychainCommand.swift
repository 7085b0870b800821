import ArgumentParser
import EmbeddedEngine
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SwiftKeychain
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl keychain …`: the keychain for people, with the subcommand names of macOS `security`.
struct KeychainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychain",
        abstract: "Add, find, delete, dump, lock, export, import and check keychain items.",
        subcommands: [
            AddGenericPassword.self, FindGenericPassword.self, DeleteGenericPassword.self,
            AddInternetPassword.self, FindInternetPassword.self, DeleteInternetPassword.self,
            DumpKeychain.self, LockKeychain.self, UnlockKeychain.self, LockOnScreenLock.self, ExportKeychain.self,
            ImportKeychain.self, CheckKeychain.self,
            TrustApplications.self, UntrustApplications.self,
        ])
}

/// Options every keychain subcommand takes.
struct KeychainOptions: ParsableArguments {
    @Option(help: "The store directory (default: $LA_DATA_DIR, else $XDG_DATA_HOME/local-authentication).")
    var dataDir: String?

    /// Runs `body` with the SecItem functions bound to this store, reaching the groups `reach` names.
    ///
    /// Embedded, `lactl` acts for the user who owns the files, so it sees every access group; new items go to the
    /// first of `$LA_ACCESS_GROUPS` (default `local.lactl`). Through localauthd it holds its own groups (its
    /// registration's), and the user is asked for a finger or the passcode first when `reach` or
    /// `$LA_ACCESS_GROUPS` goes beyond them (``OtherApplicationsAccess``).
    func run<T>(reaching reach: KeychainReach = .claimed, _ body: () throws -> T) throws -> T {
        let client = try client(reaching: reach)
        return try KeychainClientSelection.$current.withValue(client) { try body() }
    }

    /// The daemon's client when one is configured (`LA_DAEMON_SOCKET`, `client.conf`; `--data-dir` does not apply
    /// then: the daemon owns the store), its connection widened to `reach` after asking the user when that goes
    /// beyond lactl's own groups; else an embedded client on this store whose authenticators (PAM, fingerprint
    /// reader) come from the environment, which sees every group. Either prompts on the terminal, so protected
    /// items can be read after authenticating.
    ///
    /// - Throws: `KeychainCommandFailure` when the keychain cannot be opened or the user did not allow `reach`.
    func client(reaching reach: KeychainReach = .claimed) throws -> any SecurityClient {
        do {
            if case .daemon(let socket) = ClientSelection.mode() {
                guard dataDir == nil else {
                    throw KeychainCommandFailure(
                        status: errSecParam, operation: "use --data-dir (the daemon configured owns the store)")
                }
                return try daemonClient(socket: socket, reaching: reach)
            }
            var configuration = EmbeddedConfiguration.fromEnvironment()
            if let dataDir { configuration.dataDirectory = URL(fileURLWithPath: dataDir, isDirectory: true) }
            configuration.mayAccessAllGroups = true
            return try EmbeddedClient(
                configuration: configuration,
                authentication: .fromEnvironment(dataDirectory: configuration.dataDirectory),
                defaultPresenter: TerminalPresenter.environmentDefault())
        } catch let failure as KeychainCommandFailure {
            throw failure
        } catch let status as KeychainStatus {
            throw KeychainCommandFailure(
                status: status.code.rawValue, operation: "open the keychain: \(status.message)")
        } catch {
            throw KeychainCommandFailure(status: errSecNotAvailable, operation: "open the keychain")
        }
    }
}

extension KeychainOptions {
    /// localauthd's client, claiming the groups `$LA_ACCESS_GROUPS` names (when set) and the one `reach` names,
    /// or every group; what goes beyond lactl's own groups is asked of the user before the client is returned.
    private func daemonClient(socket: String, reaching reach: KeychainReach) throws -> SocketClient {
        let environment = ProcessInfo.processInfo.environment
        // Only what the environment names: lactl's default group (`local.lactl`) is not its own here.
        var claimed: [String] = []
        if environment["LA_ACCESS_GROUPS"] != nil {
            claimed = EmbeddedConfiguration.fromEnvironment(environment).accessGroups
        }
        var everyGroup = false
        switch reach {
        case .claimed, .group(nil): break
        case .group(let group?): if !claimed.contains(group) { claimed.append(group) }
        case .everyGroup: everyGroup = true
        }
        let client = try SocketClient(
            path: socket, accessGroups: claimed, allGroups: everyGroup,
            defaultPresenter: TerminalPresenter.environmentDefault())
        try OtherApplicationsAccess.request(client, claimed: claimed, everyGroup: everyGroup)
        return client
    }
}

/// A failed operation, reported as `security` does (its message on stderr) with its exit status: 44 for an item
/// that is not found, as macOS `security`, 1 otherwise.
struct KeychainCommandFailure: Error, CustomStringConvertible {
    var status: OSStatus
    var operation: String
    /// What the engine said beyond the status (which file is damaged, say).
    var detail: String?

    init(status: OSStatus, operation: String, detail: String? = nil) {
        self.status = status
        self.operation = operation
        self.detail = detail
    }

    /// `error`'s status and the engine's words.
    init(_ error: KeychainError, operation: String) {
        self.init(status: error.status, operation: operation, detail: error.detail)
    }

    var description: String {
        let text = SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
        let message = "lactl: \(operation): \(text)"
        return detail.map { message + " (\($0))" } ?? message
    }
}

func check(_ status: OSStatus, _ operation: String) throws {
    guard status == errSecSuccess else {
        // Only the failures people act on carry the engine's words: a damaged, read-only or failing store.
        let detail =
            [errSecNotAvailable, errSecReadOnly, errSecIO, errSecDiskFull].contains(status)
            ? SecItemFailureDetail.current : nil
        throw KeychainCommandFailure(status: status, operation: operation, detail: detail)
    }
}

/// Runs a keychain subcommand body, turning failures into the message and exit status.
func reporting<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let failure as KeychainCommandFailure {
        FileHandle.standardError.write(Data("\(failure)\n".utf8))
        throw ExitCode(failure.status == errSecItemNotFound ? 44 : 1)
    }
}

/// Reads a secret from the terminal with echo off, or from standard input when it is not a terminal (one line).
func readSecret(prompt: String) throws -> SecureBytes {
    let maximum = 64 * 1024
    var buffer = SecureBytes(zeros: maximum)
    let interactive = isatty(STDIN_FILENO) == 1
    let fd = interactive ? open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC) : STDIN_FILENO
    guard fd >= 0 else { throw ValidationError("no terminal to read the secret from") }
    defer { if interactive { close(fd) } }
    var saved = termios()
    // Echo off before the prompt shows (the flush then drops only what was typed before the question); the settings
    // are put back only when they could be read.
    let quieted = interactive && tcgetattr(fd, &saved) == 0
    if quieted {
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(fd, TCSAFLUSH, &quiet)
    }
    defer {
        if quieted { tcsetattr(fd, TCSAFLUSH, &saved) }
        if interactive { _ = write(fd, "\n", 1) }
    }
    if interactive { _ = prompt.withCString { write(fd, $0, strlen($0)) } }
    let length = buffer.withUnsafeMutableBytes { bytes -> Int in
        var length = 0
        while length < bytes.count {
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            bytes[length] = byte
            length += 1
        }
        return length
    }
    if length > 0, buffer.withUnsafeBytes({ $0[length - 1] }) == 0x0D { return buffer.slice(0..<length - 1) }
    return buffer.slice(0..<length)
}
