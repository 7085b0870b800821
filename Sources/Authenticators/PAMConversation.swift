internal import CPAM
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The state one PAM transaction's conversation function needs; it lives on the PAM thread for the length of one
/// transaction and is reached from C through `appdata_ptr`.
final class PAMConversationState {
    let presenter: any PasscodePresenter
    /// Set when the presenter answered nil: the transaction's result is then a user cancel whatever PAM returns.
    var cancelled = false
    /// Set when an answer could not be passed to PAM intact (it contains a NUL byte); such a passcode is wrong.
    var unusableAnswer = false
    /// How many prompts were answered, for the "was PAM asked" checks of the attempt policy tests.
    var promptsAnswered = 0

    init(presenter: any PasscodePresenter) {
        self.presenter = presenter
    }
}

/// Copies `secret` into a fresh `malloc`'d NUL-terminated C string for PAM, which takes ownership (modules wipe
/// and free responses). Returns nil when the secret contains a NUL byte (it could not be passed intact) or when
/// memory runs out.
private func duplicateForPAM(_ secret: SecureBytes) -> UnsafeMutablePointer<CChar>? {
    secret.withUnsafeBytes { bytes -> UnsafeMutablePointer<CChar>? in
        if bytes.contains(0) { return nil }
        guard let copy = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else { return nil }
        if let base = bytes.baseAddress { memcpy(copy, base, bytes.count) }
        copy[bytes.count] = 0
        return copy
    }
}

/// Wipes and frees the responses built so far when the conversation fails part way.
private func discardResponses(_ responses: UnsafeMutablePointer<pam_response>, count: Int) {
    for index in 0..<count {
        if let text = responses[index].resp {
            explicit_bzero(text, strlen(text))
            free(text)
        }
    }
    free(responses)
}

/// The C conversation function given to `pam_start`.
///
/// Never writes `*resp` when `resp` is NULL (pam_matrix's `verbose` messages and some modules call it that way);
/// answers echo-off and echo-on prompts through the presenter and forwards info/error messages.
let pamConversation:
    @convention(c) (
        Int32, UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
        UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?, UnsafeMutableRawPointer?
    ) -> Int32 = { count, messages, responsesOut, appdata in
        guard count > 0, count <= PAM_MAX_NUM_MSG, let messages, let appdata else { return PAM_CONV_ERR }
        let state = Unmanaged<PAMConversationState>.fromOpaque(appdata).takeUnretainedValue()
        guard
            let responses = calloc(Int(count), MemoryLayout<pam_response>.stride)?
                .assumingMemoryBound(to: pam_response.self)
        else { return PAM_BUF_ERR }

        for index in 0..<Int(count) {
            guard let message = messages[index] else {
                discardResponses(responses, count: index)
                return PAM_CONV_ERR
            }
            let text = message.pointee.msg.map { String(cString: $0) } ?? ""
            switch message.pointee.msg_style {
            case PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON:
                guard responsesOut != nil else {
                    // A prompt with nowhere to put the answer: refuse rather than crash.
                    discardResponses(responses, count: index)
                    return PAM_CONV_ERR
                }
                let prompt = PasscodePrompt(text: text, echo: message.pointee.msg_style == PAM_PROMPT_ECHO_ON)
                guard let answer = state.presenter.answer(prompt) else {
                    state.cancelled = true
                    discardResponses(responses, count: index)
                    return PAM_CONV_ERR
                }
                guard let copy = duplicateForPAM(answer) else {
                    state.unusableAnswer = true
                    discardResponses(responses, count: index)
                    return PAM_CONV_ERR
                }
                responses[index].resp = copy
                responses[index].resp_retcode = 0
                state.promptsAnswered += 1
            case PAM_ERROR_MSG:
                state.presenter.show(PasscodeMessage(isError: true, text: text))
            case PAM_TEXT_INFO:
                state.presenter.show(PasscodeMessage(isError: false, text: text))
            default:
                // PAM_BINARY_PROMPT and anything newer: not supported by this application.
                discardResponses(responses, count: index)
                return PAM_CONV_ERR
            }
        }
        if let responsesOut {
            responsesOut.pointee = responses
        } else {
            discardResponses(responses, count: Int(count))
        }
        return PAM_SUCCESS
    }

/// The fail-delay hook installed as `PAM_FAIL_DELAY`: libpam calls it instead of sleeping after a failure.
///
/// It does not sleep, on purpose: our attempt policy decides delays (escalating, persisted), so a module's fixed
/// 2-second `pam_fail_delay` would only slow down the user without adding protection. It only notes the delay it
/// was asked for (``pamSkippedFailDelay``), so a test can see libpam asked it rather than sleeping itself.
let pamNoFailDelay: @convention(c) (Int32, UInt32, UnsafeMutableRawPointer?) -> Void = { _, delay, _ in
    pamSkippedFailDelay.max(UInt64(delay), ordering: .relaxed)
}

/// The longest fail delay (in microseconds) libpam handed to ``pamNoFailDelay`` instead of sleeping it, since it
/// was last set to 0.
let pamSkippedFailDelay = Atomic<UInt64>(0)
