import ArgumentParser
import Foundation
import KeychainServices
import SwiftKeychain

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl keychain lock-on-screen-lock`: locks the keychain whenever logind asks a session to lock its screen
/// (`loginctl lock-session`, the desktop's lock, a suspend hook), so its `ak` items need the passcode or the finger
/// again. Run by the user unit `Resources/systemd/user/localauthd-screen-lock.service` (docs/LOGIN-KEYCHAIN.md).
struct LockOnScreenLock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock-on-screen-lock",
        abstract: "Lock the keychain each time logind sends a session its Lock signal (runs until the bus goes away).",
        discussion: """
            Listens on the system bus (DBUS_SYSTEM_BUS_ADDRESS, else the system's) for \
            org.freedesktop.login1.Session.Lock sent by logind (the owner of org.freedesktop.login1; anyone \
            else's is not heard) through dbus-monitor (package dbus-bin). With --session (default: \
            $XDG_SESSION_ID when set) only that session's signal counts. Without one (the user unit, which runs \
            outside any session), a Lock of any of this user's sessions counts: logind's record of the session \
            (/run/systemd/sessions/ID, as sd_session_get_uid reads it) names its owner, and another user's \
            session is ignored. A session logind keeps no record of counts: locking is always safe, and at worst \
            asks for the passcode or the finger once more.
            """)

    @OptionGroup var options: KeychainOptions
    @Option(help: "The logind session whose Lock signal counts (default: $XDG_SESSION_ID; none: this user's sessions).")
    var session: String?
    @Option(help: .hidden) var sessionsDirectory = "/run/systemd/sessions"

    func run() throws {
        let session = session ?? ProcessInfo.processInfo.environment["XDG_SESSION_ID"].flatMap { $0.isEmpty ? nil : $0 }
        // Only logind's own signals: the bus lets any client send one with this interface and path, and names the
        // sender truthfully, so a rule on the sender (the owner of logind's name) leaves forgeries out.
        var rule =
            "type='signal',sender='org.freedesktop.login1',interface='org.freedesktop.login1.Session',member='Lock'"
        if let session { rule += ",path='\(Self.sessionPath(session))'" }
        let monitor = try LineProducingProcess(["dbus-monitor", "--system", "--profile", rule])
        say(
            "Locking the keychain when \(session.map { "session \($0)" } ?? "a session of this user") locks its screen."
        )
        while let line = monitor.nextLine() {
            // --profile: type, time, serial, sender, destination, path, interface, member (tab-separated).
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count >= 8, fields[0] == "sig", fields[6] == "org.freedesktop.login1.Session",
                fields[7] == "Lock"
            else { continue }
            if session == nil, let owner = sessionOwner(path: String(fields[5])), owner != getuid() {
                say("\(fields[5]) locked its screen: another user's session (uid \(owner)), ignored.")
                continue
            }
            try reporting {
                try options.run {
                    do {
                        try Keychain.default.lock()
                    } catch let error as KeychainError {
                        throw KeychainCommandFailure(status: error.status, operation: "lock the keychain")
                    }
                }
            }
            say("\(fields[5]) locked its screen: the keychain is locked.")
        }
        throw ValidationError("dbus-monitor ended (\(monitor.exitDescription())): no more screen-lock signals")
    }

    /// Writes `line` to standard output at once (a unit's journal, a test's pipe).
    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// The owner of the session whose bus path is `path`, from logind's record of it (`UID=` in
    /// `<sessionsDirectory>/<id>`); nil when the path is not a session's or logind keeps no record of it.
    private func sessionOwner(path: String) -> uid_t? {
        let prefix = "/org/freedesktop/login1/session/"
        // logind's session ids are letters and digits ("3", "c2"); anything else names no file of logind's.
        guard path.hasPrefix(prefix), let id = Self.sessionID(escaped: String(path.dropFirst(prefix.count))),
            !id.isEmpty, id.utf8.allSatisfy({ Self.isLetter($0) || Self.isDigit($0) }),
            let record = try? String(contentsOfFile: sessionsDirectory + "/" + id, encoding: .utf8)
        else { return nil }
        for line in record.split(separator: "\n") where line.hasPrefix("UID=") {
            return uid_t(line.dropFirst(4))
        }
        return nil
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// The session id a bus path's last element escapes (``sessionPath(_:)`` undone); nil when it is not one.
    static func sessionID(escaped: String) -> String? {
        var bytes: [UInt8] = []
        var utf8 = escaped.utf8.makeIterator()
        while let byte = utf8.next() {
            guard byte == UInt8(ascii: "_") else {
                bytes.append(byte)
                continue
            }
            guard let high = utf8.next(), let low = utf8.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// logind's object path of session `id`: `/org/freedesktop/login1/session/` and the id escaped as systemd
    /// escapes bus paths (every byte but an ASCII letter, or a digit after the first byte, becomes `_` and two
    /// hex digits).
    static func sessionPath(_ id: String) -> String {
        var escaped = ""
        for (index, byte) in id.utf8.enumerated() {
            if isLetter(byte) || (isDigit(byte) && index > 0) {
                escaped.append(Character(Unicode.Scalar(byte)))
            } else {
                escaped += "_" + String(byte, radix: 16).leftPadded(to: 2)
            }
        }
        return "/org/freedesktop/login1/session/" + (escaped.isEmpty ? "_" : escaped)
    }
}

extension String {
    fileprivate func leftPadded(to count: Int) -> String {
        String(repeating: "0", count: Swift.max(0, count - self.count)) + self
    }
}

/// A child process (found on `PATH`) whose standard output is read line by line.
final class LineProducingProcess {
    private let pid: pid_t
    private let output: UnsafeMutablePointer<FILE>
    private var status: Int32 = 0

    /// Starts `arguments[0]` with `arguments`, its standard output a pipe to this process.
    ///
    /// - Throws: `ValidationError` when the program cannot be started.
    init(_ arguments: [String]) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ValidationError("no pipe for \(arguments[0])") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let spawned = posix_spawnp(&child, arguments[0], &actions, nil, &argv, environ)
        close(fds[1])
        guard spawned == 0, let stream = fdopen(fds[0], "r") else {
            close(fds[0])
            throw ValidationError("cannot run \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        pid = child
        output = stream
    }

    /// The next line of output without its newline; nil at the end (the process then has exited).
    func nextLine() -> String? {
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        let count = getline(&buffer, &capacity, output)
        guard count >= 0, let buffer else { return nil }
        var line = String(cString: buffer)
        if line.hasSuffix("\n") { line.removeLast() }
        return line
    }

    /// How the process ended (waits for it).
    func exitDescription() -> String {
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = (status >> 8) & 0xFF
        let signal = status & 0x7F
        return signal != 0 ? "signal \(signal)" : "exit status \(code)"
    }

    deinit {
        fclose(output)
    }
}
