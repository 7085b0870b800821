import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A pseudo-terminal the test drives as a person at a terminal would: programs started on it read what the test
/// types (``type(_:)``), and the test reads what they write (``waitFor(_:timeout:)``, ``transcript``).
package final class PseudoTerminal: @unchecked Sendable {
    // Safe to share: `received` is only touched under `lock`.
    private let master: Int32
    /// The terminal's device, for the programs started on it (`/dev/pts/N`).
    package let path: String
    private let lock = NSLock()
    private var received: [UInt8] = []

    package init() throws {
        // posix_openpt, unlockpt and ptsname as Linux implements them (Glibc's module does not export them).
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, Self.unlockRequest, &unlock) == 0,
            ioctl(master, Self.numberRequest, &number) == 0
        else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "no pseudo-terminal"])
        }
        path = "/dev/pts/\(number)"
        var size = winsize(ws_row: 30, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
    }

    /// `TIOCSPTLCK` and `TIOCGPTN` (asm-generic/ioctls.h).
    private static let unlockRequest: UInt = 0x4004_5431
    private static let numberRequest: UInt = 0x8004_5430

    deinit {
        close(master)
    }

    /// Starts `executable arguments` with the terminal as its standard input, output and error (and, in a session
    /// of its own, as its controlling terminal).
    package func spawn(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> SpawnedProcess
    {
        try SpawnedProcess(executable, arguments, environment: environment, terminal: path)
    }

    /// Types `text` as a person would, a character at a time.
    package func type(_ text: String) {
        for byte in Array(text.utf8) {
            var byte = byte
            while write(master, &byte, 1) < 0 && (errno == EINTR || errno == EAGAIN) { usleep(1_000) }
            usleep(5_000)
        }
    }

    /// Everything the programs wrote so far, control sequences included.
    package var transcript: String {
        drain()
        return lock.withLock { String(decoding: received, as: UTF8.self) }
    }

    /// Waits up to `timeout` seconds until the programs wrote `text` (since the terminal was made).
    package func waitFor(_ text: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if transcript.contains(text) { return true }
            usleep(50_000)
        }
        return transcript.contains(text)
    }

    /// Waits up to `timeout` seconds until the terminal no longer echoes (a program about to read a passcode turns
    /// echo off right before it reads; what is typed earlier may be echoed or flushed). The master side reports the
    /// terminal's settings as the program set them.
    package func waitForEchoOff(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var settings = termios()
        while Date() < deadline {
            if tcgetattr(master, &settings) == 0 && settings.c_lflag & tcflag_t(ECHO) == 0 { return true }
            usleep(10_000)
        }
        return false
    }

    /// Whether the terminal echoes what is typed now (as the programs on it last set it).
    package var echoes: Bool {
        var settings = termios()
        return tcgetattr(master, &settings) == 0 && settings.c_lflag & tcflag_t(ECHO) != 0
    }

    /// Reads what is waiting on the master side.
    private func drain() {
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = read(master, &chunk, chunk.count)
            guard count > 0 else { return }
            lock.withLock { received += chunk[0..<count] }
        }
    }
}
