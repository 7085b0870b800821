import Foundation
import LocalAuthentication

/// Where the agent's prompts go when it has no terminal of its own (started by systemd or in the background):
/// each fingerprint prompt is written to standard error with what is being signed, and a passcode is never asked
/// (there is nowhere the agent could read it safely), so only the finger can approve.
public struct AgentNoticePresenter: AuthenticationPresenter {
    public init() {}

    public func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {
        write("lactl ssh-agent: touch the fingerprint reader to \(prompt.reason)")
    }

    public func fingerprintPromptDidChange(_ status: FingerprintPromptStatus) {
        if case .retry(let advice) = status { write("lactl ssh-agent: \(advice)") }
        if case .notRecognized = status { write("lactl ssh-agent: fingerprint not recognised") }
    }

    public func fingerprintPromptDidEnd() {}

    public func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? { nil }

    public func show(_ message: String, isError: Bool) { write("lactl ssh-agent: \(message)") }

    private func write(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
