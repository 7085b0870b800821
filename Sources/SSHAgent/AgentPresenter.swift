import Foundation
import LocalAuthentication

/// Where the agent's prompts go when it has no terminal of its own (started by systemd or in the background):
/// each fingerprint prompt is written to standard error with what is being signed, and a passcode is never asked
/// (there is nowhere the agent could read it safely), so only the finger can approve. `lactl fido serve` uses it
/// too, with its own name.
public struct AgentNoticePresenter: AuthenticationPresenter {
    /// What each line starts with: the program's name.
    let program: String

    /// A presenter that writes to standard error, each line starting with `program`.
    public init(program: String = "lactl ssh-agent") { self.program = program }

    /// Writes what is about to be signed and asks for a finger.
    public func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {
        write("\(program): touch the fingerprint reader to \(prompt.reason)")
    }

    /// Writes the reader's advice (a retry) and a finger it did not recognise.
    public func fingerprintPromptDidChange(_ status: FingerprintPromptStatus) {
        if case .retry(let advice) = status { write("\(program): \(advice)") }
        if case .notRecognized = status { write("\(program): fingerprint not recognised") }
    }

    /// Nothing to take down: the notice was a line of text.
    public func fingerprintPromptDidEnd() {}

    /// Never answers: the agent has nowhere to read a passcode safely, so only a finger approves.
    public func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? { nil }

    /// Writes the engine's message.
    public func show(_ message: String, isError: Bool) { write("\(program): \(message)") }

    private func write(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

/// Where the agent draws each signature's prompt.
public enum AgentPrompts: Sendable {
    /// Where the user is: the requesting program's terminal when it has one (read — Ctrl-C, Enter for the
    /// fallback, a passcode with echo off — only while that program is in the terminal's foreground, so no other
    /// program's keystrokes are taken); else the agent's own terminal (unless `LA_PRESENTER=none`); else a
    /// desktop notification when a graphical session is there; else a line on the agent's standard error. Only a
    /// terminal can answer a passcode question.
    case automatic
    /// Always this presenter (nil: no prompt can be shown, so only a reused approval signs).
    case fixed((any AuthenticationPresenter)?)

    /// The presenter for a request from `peer`.
    public func presenter(for peer: AgentPeer?) -> (any AuthenticationPresenter)? {
        switch self {
        case .fixed(let presenter):
            return presenter
        case .automatic:
            if let terminal = peer?.terminal {
                return TerminalAuthenticationPresenter(device: terminal.device, acceptsInput: terminal.isForeground)
            }
            let environment = ProcessInfo.processInfo.environment
            if environment["LA_PRESENTER"] != "none", TerminalAuthenticationPresenter.isAvailable {
                return TerminalAuthenticationPresenter()
            }
            if let notifier = DesktopNotificationPresenter() { return notifier }
            return AgentNoticePresenter()
        }
    }
}

/// Shows each fingerprint prompt as a desktop notification (`notify-send`, from libnotify-bin) and on standard
/// error; asks no passcode. Available when `notify-send` is installed and the agent has a session bus and a display.
public struct DesktopNotificationPresenter: AuthenticationPresenter {
    static let candidates = ["/usr/bin/notify-send", "/usr/local/bin/notify-send"]
    let executable: String
    let notice = AgentNoticePresenter()

    /// A notifier, or nil when notifications cannot be shown.
    public init?() {
        let environment = ProcessInfo.processInfo.environment
        guard environment["DBUS_SESSION_BUS_ADDRESS"] != nil,
            environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil,
            let executable = Self.candidates.first(where: FileManager.default.isExecutableFile(atPath:))
        else { return nil }
        self.executable = executable
    }

    /// Writes the notice as ``AgentNoticePresenter`` does, and shows a desktop notification (`notify-send`).
    public func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {
        notice.fingerprintPromptDidBegin(prompt, respond: respond)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--app-name=lactl ssh-agent", "--urgency=critical", "--expire-time=30000", "SSH signature",
            "Touch the fingerprint reader to \(prompt.reason)",
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try? process.run()
    }

    /// Writes the reader's advice as ``AgentNoticePresenter`` does.
    public func fingerprintPromptDidChange(_ status: FingerprintPromptStatus) {
        notice.fingerprintPromptDidChange(status)
    }

    /// Never answers: only a finger approves an agent's signature.
    public func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? { nil }

    /// Writes the engine's message as ``AgentNoticePresenter`` does.
    public func show(_ message: String, isError: Bool) { notice.show(message, isError: isError) }
}
