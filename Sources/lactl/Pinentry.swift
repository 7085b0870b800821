import Foundation
import SecureCrypto
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One run of a pinentry program (GnuPG's: `pinentry-gnome3`, `-gtk-2`, `-qt`, `-curses`, `-tty`), spoken to in
/// the Assuan protocol over its standard input and output: one dialog, then it is ended.
///
/// The passcode it returns arrives in a `D` line, percent-encoded; it is decoded straight into zeroizing memory
/// and the line's buffer is wiped. ``kill()`` (from any thread) ends the dialog at once: a blocked call then
/// returns ``Outcome/ended``.
final class Pinentry: Sendable {
    /// How a dialog ended.
    enum Outcome {
        /// The user typed this and pressed OK (GETPIN).
        case secret(SecureBytes)
        /// The user pressed OK (CONFIRM).
        case confirmed
        /// The user pressed the third button (CONFIRM with SETNOTOK).
        case notConfirmed
        /// The user cancelled, or the dialog timed out.
        case cancelled
        /// ``kill()`` ended it, or the program failed or went silent.
        case ended
    }

    /// Why pinentry could not show a dialog.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Where the dialog appears: the terminal (pinentry-tty and -curses need it) and the display.
    struct Place: Sendable {
        var program: String
        var ttyName: String?
        var ttyType: String?
        /// How long a dialog may wait for the user before it counts as cancelled (its own SETTIMEOUT, and a
        /// watchdog that kills a pinentry that does not keep it).
        var timeout: Int
        /// The program's whole environment (``Pinentry/environment(from:uid:)``).
        var environment: [String: String]
    }

    /// The variables a pinentry gets: the display it draws on, nothing else of the agent's environment (which is
    /// whoever started the agent's: a `GTK_MODULES`, `QT_PLUGIN_PATH`, `GNUPGHOME` or `PINENTRY_USER_DATA` there
    /// would load code into the dialog or change what it does). `DISPLAY`, `XAUTHORITY` and `WAYLAND_DISPLAY` as the
    /// agent has them (a Wayland display only as a name under the runtime directory); `XDG_RUNTIME_DIR` and the
    /// session bus only at the user's own `/run/user/<uid>` (pinentry-gnome3 asks the desktop's prompter there);
    /// `PATH` fixed.
    static func environment(from agent: [String: String], uid: uid_t) -> [String: String] {
        // HOME and the XDG directories name nothing: a toolkit that falls back to the user's home would read the
        // user's own settings (a GTK settings file can name modules to load).
        var environment = [
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
            "XDG_DATA_HOME": "/nonexistent", "XDG_CACHE_HOME": "/nonexistent",
        ]
        let runtime = "/run/user/\(uid)"
        if let display = agent["DISPLAY"], !display.isEmpty { environment["DISPLAY"] = display }
        if let authority = agent["XAUTHORITY"], authority.hasPrefix("/") { environment["XAUTHORITY"] = authority }
        if agent["XDG_RUNTIME_DIR"] == runtime {
            environment["XDG_RUNTIME_DIR"] = runtime
            if let wayland = agent["WAYLAND_DISPLAY"], !wayland.isEmpty, !wayland.contains("/") {
                environment["WAYLAND_DISPLAY"] = wayland
            }
            if agent["DBUS_SESSION_BUS_ADDRESS"] == "unix:path=\(runtime)/bus" {
                environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(runtime)/bus"
            }
        }
        return environment
    }

    /// The terminal type pinentry is told (`OPTION ttytype`): `term` when it is a terminal type's name (letters,
    /// digits, `-`, `+`, `.`, `_`, at most 64), else `xterm`. `TERM` is whoever started the agent's, and anything
    /// else in it would be sent to pinentry as Assuan commands of its own.
    static func terminalType(_ term: String?) -> String {
        guard let term, !term.isEmpty, term.count <= 64,
            term.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-+._".unicodeScalars.contains($0))
            })
        else { return "xterm" }
        return term
    }

    /// `path` resolved (symbolic links followed), when it is a program the administrator put there: a regular,
    /// executable file owned by root and writable by no one else, in directories owned by root and writable by no
    /// one else (a directory others may write is accepted only with the sticky bit, as `/tmp`: there nobody but
    /// root can rename or remove root's entries). Any other pinentry could be the user's own or any program's, and
    /// would read the passcode typed into it.
    ///
    /// - Throws: ``Failure`` naming what is wrong.
    static func verifiedProgram(_ path: String) throws(Failure) -> String {
        guard path.hasPrefix("/") else {
            throw Failure(description: "not an absolute path")
        }
        guard let resolvedPointer = realpath(path, nil) else {
            throw Failure(description: "it cannot be resolved: \(String(cString: strerror(errno)))")
        }
        let resolved = String(cString: resolvedPointer)
        free(resolvedPointer)
        var info = stat()
        guard lstat(resolved, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw Failure(description: "\(resolved) is not a regular file")
        }
        guard info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            throw Failure(description: "\(resolved) is not owned by root or others can write it")
        }
        guard info.st_mode & 0o111 != 0 else { throw Failure(description: "\(resolved) is not executable") }
        var directory = (resolved as NSString).deletingLastPathComponent
        while true {
            guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                throw Failure(description: "\(directory) is not a directory")
            }
            let othersWrite = info.st_mode & 0o022 != 0
            guard info.st_uid == 0, !othersWrite || info.st_mode & S_ISVTX != 0 else {
                throw Failure(description: "its directory \(directory) is not owned by root or others can write it")
            }
            if directory == "/" { break }
            directory = (directory as NSString).deletingLastPathComponent
        }
        return resolved
    }

    private let pid: pid_t
    private let input: Int32
    private let output: Int32
    private let killed = Atomic<Bool>(false)
    private let deadline: ContinuousClock.Instant
    /// Called once the program was reaped, on the reaping thread.
    private let reaped: @Sendable () -> Void
    /// The terminal's settings before the dialog, put back when the program had to be killed (a text-mode
    /// pinentry killed mid-question leaves the terminal without echo).
    private let terminal: (descriptor: Int32, settings: termios)?

    /// Starts `place.program` and reads its greeting; `reaped` is called once it ended and was reaped (after
    /// ``kill()``, which every dialog ends with).
    ///
    /// - Throws: ``Failure`` when it cannot be started or does not greet within 10 s.
    init(_ place: Place, reaped: @escaping @Sendable () -> Void) throws(Failure) {
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else {
            for descriptor in toChild + fromChild where descriptor >= 0 { close(descriptor) }
            reaped()
            throw Failure(description: "cannot make pipes for pinentry: \(String(cString: strerror(errno)))")
        }
        // Close-on-exec, so that no other program the agent starts keeps a dialog's pipe open.
        for descriptor in toChild + fromChild { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let environment = place.environment
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(place.program), nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        // Never through PATH, and never by its path again: the file is opened, checked once more as it is open (root's,
        // nobody else may write it), and that very file runs (`/proc/self/fd/N`), whatever replaced the path since
        // ``verifiedProgram(_:)`` looked at it. Not close-on-exec: a script's interpreter opens it by that name.
        let program = open(place.program, O_RDONLY | O_NOFOLLOW)
        var info = stat()
        guard program >= 0, fstat(program, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == 0,
            info.st_mode & 0o022 == 0, info.st_mode & 0o111 != 0
        else {
            if program >= 0 { close(program) }
            for descriptor in toChild + fromChild { close(descriptor) }
            reaped()
            throw Failure(description: "\(place.program) is no longer root's program that nobody else may write")
        }
        let spawned = posix_spawn(&pid, "/proc/self/fd/\(program)", &actions, nil, argv, envp)
        close(program)
        close(toChild[0])
        close(fromChild[1])
        guard spawned == 0 else {
            close(toChild[1])
            close(fromChild[0])
            reaped()
            throw Failure(description: "cannot start \(place.program): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        self.reaped = reaped
        var settings = termios()
        if let tty = place.ttyName, case let descriptor = open(tty, O_RDWR | O_NOCTTY | O_CLOEXEC), descriptor >= 0 {
            if tcgetattr(descriptor, &settings) == 0 {
                terminal = (descriptor, settings)
            } else {
                close(descriptor)
                terminal = nil
            }
        } else {
            terminal = nil
        }
        input = toChild[1]
        output = fromChild[0]
        deadline = .now + .seconds(place.timeout + 5)
        guard case .ok = readResponse(until: .now + .seconds(10)).status else {
            kill()
            throw Failure(description: "\(place.program) did not greet within 10 s")
        }
        var options: [String] = []
        if let tty = place.ttyName { options.append("OPTION ttyname=\(Self.escaped(tty))") }
        if let type = place.ttyType { options.append("OPTION ttytype=\(Self.escaped(type))") }
        options.append("OPTION lc-ctype=C.UTF-8")
        options.append("SETTIMEOUT \(place.timeout)")
        for option in options {
            // A pinentry that knows no such option says so; the dialog works without it.
            _ = send(option)
        }
    }

    deinit {
        kill()
        close(input)
        close(output)
    }

    /// Ends the dialog and the program, from any thread: a call blocked on it returns ``Outcome/ended`` (it sees
    /// the flag within 200 ms, or the end of the program's output at once).
    ///
    /// The pipes stay open until this object goes: closed from another thread while a call reads them, their
    /// numbers could be given to the next dialog's pipes, and the call would read that dialog's answer.
    func kill() {
        guard !killed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.kill(pid, SIGTERM)
        // Reaped off the caller's thread: a pinentry slow to die does not hold it.
        let (pid, reaped, terminal) = (self.pid, self.reaped, self.terminal)
        Thread.detachNewThread {
            var status: Int32 = 0
            var done = false
            for _ in 0..<50 where !done {
                done = waitpid(pid, &status, WNOHANG) == pid
                if !done { usleep(20_000) }
            }
            if !done {
                Glibc.kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
            if case (let descriptor, var settings)? = terminal {
                // Killed by a signal: the terminal as it was before the dialog.
                if status & 0x7f != 0 { tcsetattr(descriptor, TCSANOW, &settings) }
                close(descriptor)
            }
            reaped()
        }
    }

    /// Asks for a secret: `description` above the field, `prompt` beside it, `error` (a failed try) in red.
    func getPin(title: String, description: String, prompt: String, ok: String?, cancel: String?, error: String?)
        -> Outcome
    {
        var lines = ["SETTITLE \(Self.escaped(title))", "SETDESC \(Self.escaped(description))"]
        lines.append("SETPROMPT \(Self.escaped(prompt))")
        if let ok { lines.append("SETOK \(Self.escaped(ok))") }
        if let cancel { lines.append("SETCANCEL \(Self.escaped(cancel))") }
        if let error { lines.append("SETERROR \(Self.escaped(error))") }
        for line in lines where send(line).status == .failed {
            return .ended
        }
        let answer = send("GETPIN")
        switch answer.status {
        case .ok: return .secret(answer.data ?? SecureBytes([]))
        case .error(let code): return Self.isCancel(code) ? .cancelled : .ended
        case .failed: return .ended
        }
    }

    /// Asks to confirm: OK, the optional third button (`notOK`), or cancel.
    func confirm(title: String, description: String, ok: String, notOK: String?, cancel: String?) -> Outcome {
        var lines = ["SETTITLE \(Self.escaped(title))", "SETDESC \(Self.escaped(description))"]
        lines.append("SETOK \(Self.escaped(ok))")
        if let notOK { lines.append("SETNOTOK \(Self.escaped(notOK))") }
        if let cancel { lines.append("SETCANCEL \(Self.escaped(cancel))") }
        for line in lines where send(line).status == .failed {
            return .ended
        }
        switch send("CONFIRM").status {
        case .ok: return .confirmed
        case .error(let code) where code & 0xffff == 114: return .notConfirmed
        case .error(let code): return Self.isCancel(code) ? .cancelled : .ended
        case .failed: return .ended
        }
    }

    /// Shows a message with one button (OK); returns when the user pressed it, or when killed.
    func message(title: String, description: String, ok: String) -> Outcome {
        for line in [
            "SETTITLE \(Self.escaped(title))", "SETDESC \(Self.escaped(description))", "SETOK \(Self.escaped(ok))",
        ]
        where send(line).status == .failed {
            return .ended
        }
        switch send("CONFIRM --one-button").status {
        case .ok: return .confirmed
        case .error(let code): return Self.isCancel(code) ? .cancelled : .ended
        case .failed: return .ended
        }
    }

    /// GPG_ERR_CANCELED (99), GPG_ERR_TIMEOUT (62), GPG_ERR_FULLY_CANCELED (198) in an Assuan error code.
    private static func isCancel(_ code: UInt32) -> Bool {
        [99, 62, 198].contains(code & 0xffff)
    }

    // MARK: The protocol

    private struct Response {
        enum Status: Equatable {
            case ok
            case error(UInt32)
            case failed
        }

        var status: Status
        /// The `D` lines, decoded, in zeroizing memory.
        var data: SecureBytes?
    }

    /// Sends one command line and reads its response.
    private func send(_ line: String) -> Response {
        guard !killed.load(ordering: .acquiring) else { return Response(status: .failed) }
        let bytes = Array((line + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { write(input, $0.baseAddress! + sent, $0.count - sent) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return Response(status: .failed) }
            sent += count
        }
        return readResponse(until: deadline)
    }

    /// Reads lines until `OK` or `ERR`, collecting `D` lines (percent-decoded) and skipping status (`S`), comments
    /// (`#`) and inquiries it cannot answer (`INQUIRE`, answered with `CAN`).
    private func readResponse(until deadline: ContinuousClock.Instant) -> Response {
        // Room reserved once, so that no copy of a secret is left behind by a reallocation.
        var data = [UInt8]()
        data.reserveCapacity(8_192)
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        var line = [UInt8]()
        line.reserveCapacity(8_192)
        defer { line.withUnsafeMutableBytes { secureZero($0) } }
        while true {
            guard readLine(into: &line, until: deadline) else { return Response(status: .failed) }
            if line.starts(with: Array("OK".utf8)) && (line.count == 2 || line[2] == 0x20) {
                return Response(status: .ok, data: data.isEmpty ? nil : SecureBytes(data))
            }
            if line.starts(with: Array("ERR ".utf8)) {
                let digits = line.dropFirst(4).prefix { $0 >= 0x30 && $0 <= 0x39 }
                return Response(status: .error(UInt32(String(decoding: digits, as: UTF8.self)) ?? 0))
            }
            if line.starts(with: Array("D ".utf8)) {
                Self.percentDecode(line.dropFirst(2), into: &data)
            } else if line.starts(with: Array("INQUIRE".utf8)) {
                let cancel = Array("CAN\n".utf8)
                guard cancel.withUnsafeBytes({ write(input, $0.baseAddress, $0.count) }) == cancel.count else {
                    return Response(status: .failed)
                }
            }
        }
    }

    /// Reads one line (without its newline) into `line`, byte by byte (a pinentry writes little), waiting until
    /// `deadline`; false at the end of the output, on an error, at the deadline or once killed.
    private func readLine(into line: inout [UInt8], until deadline: ContinuousClock.Instant) -> Bool {
        line.withUnsafeMutableBytes { secureZero($0) }
        line.removeAll(keepingCapacity: true)
        var byte: UInt8 = 0
        while true {
            guard !killed.load(ordering: .acquiring), ContinuousClock.now < deadline else { return false }
            var readable = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let ready = poll(&readable, 1, 200)
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { return false }
            if ready == 0 { continue }
            let count = read(output, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { return false }
            if byte == 0x0a { return true }
            guard line.count < 8_192 else { return false }
            line.append(byte)
        }
    }

    /// `%XX` escapes decoded, appended to `output`.
    private static func percentDecode(_ text: ArraySlice<UInt8>, into output: inout [UInt8]) {
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == 0x25, index + 2 < text.endIndex, let high = hexValue(text[index + 1]),
                let low = hexValue(text[index + 2])
            {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(text[index])
                index += 1
            }
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// A parameter as Assuan carries it: `%`, CR and LF percent-escaped.
    static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "%": result += "%25"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
