import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

/// Draws prompts on a terminal (the controlling terminal, `/dev/tty`, by default): the reason and titles, "place
/// your finger" and retry reasons, and the passcode read with echo off straight into zeroizing memory. Ctrl-C (or
/// Ctrl-D on an empty line) cancels; during a fingerprint prompt, Enter chooses the fallback when one is offered.
package final class TerminalPresenter: EvaluationPresenter {
    /// The longest answer accepted, in bytes.
    package static let maximumLength = 1024

    /// The terminal device written to and read from.
    package let device: String
    /// Whether the terminal is read (keys during a fingerprint prompt, passcodes); when false, prompts are only
    /// written and a passcode question is declined.
    package let acceptsInput: Bool

    private let watcher = Mutex<FingerprintKeyWatcher?>(nil)

    /// A presenter on `device` (default `/dev/tty`), reading it only when `acceptsInput`.
    package init(device: String = "/dev/tty", acceptsInput: Bool = true) {
        self.device = device
        self.acceptsInput = acceptsInput
    }

    /// The presenter a client uses by default: the terminal when this process has one and `$LA_PRESENTER` is not
    /// `none`.
    package static func environmentDefault(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> TerminalPresenter? {
        guard environment["LA_PRESENTER"] != "none", isAvailable else { return nil }
        return TerminalPresenter()
    }

    /// Whether this process has a controlling terminal to prompt on.
    package static var isAvailable: Bool {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }

    // MARK: EvaluationPresenter

    package func fingerprintPromptDidBegin(
        _ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void
    ) {
        var text = prompt.reason + "\nPlace your finger on the reader"
        guard acceptsInput else { return writeLine(text) }
        let cancel = (prompt.cancelTitle?.isEmpty ?? true) ? "Cancel" : prompt.cancelTitle!
        text += " (Ctrl-C: \(cancel)"
        if prompt.offersFallback { text += ", Enter: \(prompt.fallbackTitle ?? "Enter Password")" }
        text += ")"
        writeLine(text)
        let started = FingerprintKeyWatcher.start(
            device: device, offersFallback: prompt.offersFallback, respond: respond)
        watcher.withLock { $0 = started }
    }

    package func fingerprintPrompt(_ event: FingerprintPromptEvent) {
        switch event {
        case .waitingForFinger: break
        case .retry(let reason): writeLine("Fingerprint: \(reason)")
        case .notRecognized: writeLine("Fingerprint not recognised")
        }
    }

    package func fingerprintPromptDidEnd() {
        watcher.withLock { current in
            current?.stop()
            current = nil
        }
    }

    package func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        guard acceptsInput else { return nil }
        if !prompt.reason.isEmpty { writeLine(prompt.reason) }
        return answer(question)
    }

    /// Reads the answer to `prompt` from the terminal, echo off unless the question allows it; nil on Ctrl-C.
    package func answer(_ prompt: PasscodePrompt) -> SecureBytes? {
        guard acceptsInput else { return nil }
        let fd = open(device, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var saved = termios()
        let isTerminal = tcgetattr(fd, &saved) == 0
        if isTerminal {
            var raw = saved
            // No echo for passcodes; no signals, so Ctrl-C arrives as a byte we turn into a cancel and the
            // terminal is always restored; canonical mode off to see Ctrl-C and Ctrl-D ourselves. Set before the
            // prompt is shown, as readpassphrase(3) does: the flush drops what was typed before the question, never
            // an answer typed as soon as the question showed.
            raw.c_lflag &= ~tcflag_t(ICANON | ISIG | (prompt.echo ? 0 : ECHO))
            raw.c_cc.16 = 1  // VMIN
            raw.c_cc.5 = 0  // VTIME
            tcsetattr(fd, TCSAFLUSH, &raw)
        }
        Self.write(fd, prompt.text)
        defer {
            if isTerminal { tcsetattr(fd, TCSAFLUSH, &saved) }
            if !prompt.echo { Self.write(fd, "\n") }
        }
        var buffer = SecureBytes(zeros: Self.maximumLength)
        var length = 0
        let withdrawal = QuestionWithdrawal.current
        let outcome = buffer.withUnsafeMutableBytes { bytes -> Bool in
            while true {
                // The question is withdrawn when its request ended first: stop reading (a cancel), so the terminal
                // is put back as it was instead of waiting in `read` with echo off.
                guard Self.waitForInput(fd, withdrawal) else { return false }
                var byte: UInt8 = 0
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return length > 0 }
                switch byte {
                case 0x03: return false  // Ctrl-C
                case 0x04: if length == 0 { return false } else { return true }  // Ctrl-D
                case 0x0A, 0x0D: return true
                case 0x7F, 0x08:
                    if length > 0 {
                        length -= 1
                        bytes[length] = 0
                        if prompt.echo { Self.write(fd, "\u{8} \u{8}") }
                    }
                default:
                    guard length < bytes.count else { return true }
                    bytes[length] = byte
                    length += 1
                }
            }
        }
        return outcome ? buffer.slice(0..<length) : nil
    }

    package func show(_ message: PasscodeMessage) {
        writeLine(message.text)
    }

    /// Shows the question and reads one key: d (or Enter) denies, o allows once, a always allows; Ctrl-C cancels.
    package func confirm(_ prompt: TrustPrompt) -> TrustChoice? {
        guard acceptsInput else { return nil }
        writeLine(prompt.text)
        while true {
            guard let line = answer(PasscodePrompt(text: "[d]eny, allow [o]nce, [a]lways allow: ", echo: true)) else {
                return nil
            }
            switch line.withUnsafeBytes({ $0.first }) {
            case nil, UInt8(ascii: "d"), UInt8(ascii: "D"): return .deny
            case UInt8(ascii: "o"), UInt8(ascii: "O"): return .allowOnce
            case UInt8(ascii: "a"), UInt8(ascii: "A"): return .alwaysAllow
            default: continue
            }
        }
    }

    /// Waits until `fd` has input (true) or `withdrawal` withdraws the question (false).
    private static func waitForInput(_ fd: Int32, _ withdrawal: QuestionWithdrawal?) -> Bool {
        guard let withdrawal else { return true }
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: withdrawal.fileDescriptor, events: Int16(POLLIN), revents: 0),
        ]
        while !withdrawal.isWithdrawn {
            // Without an eventfd the flag is looked at every 100 ms.
            let ready = poll(&fds, withdrawal.fileDescriptor >= 0 ? 2 : 1, withdrawal.fileDescriptor >= 0 ? -1 : 100)
            if ready < 0 && errno != EINTR { return true }
            if fds[0].revents != 0 { return !withdrawal.isWithdrawn }
        }
        return false
    }

    /// Writes `text` and a newline to the terminal, or to standard error when the terminal cannot be opened.
    package func writeLine(_ text: String) {
        let fd = open(device, O_WRONLY | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            FileHandle.standardError.write(Data((text + "\n").utf8))
            return
        }
        defer { close(fd) }
        Self.write(fd, text + "\n")
    }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }
}

/// Watches the terminal while a fingerprint prompt is shown: Ctrl-C cancels, Enter falls back. Runs on its own
/// thread, polling the terminal and a pipe that `stop()` writes to; puts the terminal back before it answers, so a
/// passcode prompt the answer starts finds the terminal as it was (and its echo off stays off).
// Safe to share: `tty` and `stopRead` are set once and only the watcher thread uses them; the pipe's write end is
// behind a lock, closed once, so a `stop()` after the thread ended writes nowhere (never into a descriptor number
// reused since).
private final class FingerprintKeyWatcher: @unchecked Sendable {
    private let tty: Int32
    private let stopRead: Int32
    private let stopWrite: Mutex<Int32?>

    private init(tty: Int32, stopRead: Int32, stopWrite: Int32) {
        self.tty = tty
        self.stopRead = stopRead
        self.stopWrite = Mutex(stopWrite)
    }

    static func start(
        device: String, offersFallback: Bool, respond: @escaping @Sendable (PromptAction) -> Void
    ) -> FingerprintKeyWatcher? {
        let tty = open(device, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { return nil }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            close(tty)
            return nil
        }
        let watcher = FingerprintKeyWatcher(tty: tty, stopRead: fds[0], stopWrite: fds[1])
        let thread = Thread {
            nameCurrentThread("la.terminal")
            let action = watcher.watch(offersFallback: offersFallback)
            if let action { respond(action) }
        }
        thread.start()
        return watcher
    }

    func stop() {
        stopWrite.withLock { descriptor in
            guard let descriptor else { return }
            var byte: UInt8 = 1
            _ = write(descriptor, &byte, 1)
        }
    }

    /// Waits for Ctrl-C, Ctrl-D or (with a fallback) Enter, or for `stop()`; the action to answer with, once the
    /// terminal is put back and the descriptors closed.
    private func watch(offersFallback: Bool) -> PromptAction? {
        defer {
            close(tty)
            close(stopRead)
            stopWrite.withLock { descriptor in
                if let open = descriptor { close(open) }
                descriptor = nil
            }
        }
        var saved = termios()
        let isTerminal = tcgetattr(tty, &saved) == 0
        if isTerminal {
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ISIG | ECHO)
            raw.c_cc.16 = 1  // VMIN
            raw.c_cc.5 = 0  // VTIME
            tcsetattr(tty, TCSANOW, &raw)
        }
        defer { if isTerminal { tcsetattr(tty, TCSANOW, &saved) } }
        while true {
            var polled = [
                pollfd(fd: tty, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0),
            ]
            let n = poll(&polled, 2, -1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || polled[1].revents != 0 { return nil }
            var byte: UInt8 = 0
            guard read(tty, &byte, 1) == 1 else { return nil }
            switch byte {
            case 0x03, 0x04: return .cancel
            case 0x0A where offersFallback, 0x0D where offersFallback: return .fallback
            default: continue
            }
        }
    }
}
