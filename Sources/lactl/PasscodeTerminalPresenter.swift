import Authenticators
import Foundation
import SecureCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Shows PAM's prompts on the controlling terminal and reads answers from `/dev/tty`, with echo off for
/// passcodes; Ctrl-C or Ctrl-D on an empty line cancels. The answer goes straight into zeroizing memory.
struct PasscodeTerminalPresenter: PasscodePresenter {
    /// The longest answer accepted, in bytes.
    static let maximumLength = 1024

    func answer(_ prompt: PasscodePrompt) -> SecureBytes? {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        write(fd, prompt.text)
        var saved = termios()
        let isTerminal = tcgetattr(fd, &saved) == 0
        if isTerminal {
            var raw = saved
            // No echo for passcodes; no signals, so Ctrl-C arrives as a byte we turn into a cancel and the
            // terminal is always restored; canonical mode off to see Ctrl-C and Ctrl-D ourselves.
            raw.c_lflag &= ~tcflag_t(ICANON | ISIG | (prompt.echo ? 0 : ECHO))
            raw.c_cc.16 = 1  // VMIN
            raw.c_cc.5 = 0  // VTIME
            tcsetattr(fd, TCSAFLUSH, &raw)
        }
        defer {
            if isTerminal { tcsetattr(fd, TCSAFLUSH, &saved) }
            if !prompt.echo { write(fd, "\n") }
        }
        var buffer = SecureBytes(zeros: Self.maximumLength)
        var length = 0
        let outcome = buffer.withUnsafeMutableBytes { bytes -> Bool in
            while true {
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
                        if prompt.echo { write(fd, "\u{8} \u{8}") }
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

    func show(_ message: PasscodeMessage) {
        let fd = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            FileHandle.standardError.write(Data((message.text + "\n").utf8))
            return
        }
        defer { close(fd) }
        write(fd, message.text + "\n")
    }

    private func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }
}
