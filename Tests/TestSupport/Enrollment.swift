import Authenticators
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer

/// Answers every passcode question with a fixed passcode (the test user's), cancels fingerprint prompts.
package struct FixedPasscodePresenter: EvaluationPresenter {
    package let passcode: String

    package init(passcode: String) { self.passcode = passcode }

    package func fingerprintPromptDidBegin(
        _ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void
    ) {
        respond(.cancel)
    }
    package func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    package func fingerprintPromptDidEnd() {}
    package func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        SecureBytes(Array(passcode.utf8))
    }
    package func show(_ message: PasscodeMessage) {}
}

/// Enrolls `finger` through `client`'s enrollment request, as `lactl biometry enroll` does: a context holding the
/// passcode `secret` first, then the five scans of `printID` from `socket`.
package func enrollThroughRequests(
    _ client: any SecurityClient, socket: VirtualReaderSocket, printID: String, finger: Finger
) async throws -> EnrolledPrintInfo {
    let context = try await client.passcodeContext(
        reason: "enroll", presenter: FixedPasscodePresenter(passcode: "secret"))
    defer { Task { _ = try? await client.send(.discard(context)) } }
    // As many scans as the reader asks for (5 on libfprint's virtual devices).
    var stages = 5
    if case .reader(let reader) = try await client.send(.reader) { stages = reader.enrollStages }
    async let enrolled = client.send(.enroll(finger, context: context))
    try await socket.send(Array(repeating: "SCAN \(printID)", count: stages))
    guard case .enrolled(let info) = try await enrolled else {
        throw AuthenticationError(.invalidContext, "the enrollment answered something else")
    }
    return info
}

/// The prints `client`'s engine has enrolled, through the administration request.
package func enrolledPrints(_ client: any SecurityClient) async throws -> [EnrolledPrintInfo] {
    guard case .prints(let prints, _) = try await client.send(.enrolledPrints) else {
        throw AuthenticationError(.invalidContext, "the request answered something else")
    }
    return prints
}

/// Removes the print enrolled for `finger` through `client`'s request, with the passcode `secret` first.
package func removePrintThroughRequests(_ client: any SecurityClient, finger: Finger) async throws {
    guard let print = try await enrolledPrints(client).first(where: { $0.finger == finger }) else {
        throw AuthenticationError(.biometryNotEnrolled, "no print for \(finger)")
    }
    let context = try await client.passcodeContext(
        reason: "remove", presenter: FixedPasscodePresenter(passcode: "secret"))
    defer { Task { _ = try? await client.send(.discard(context)) } }
    _ = try await client.send(.removePrint(print.identifier, context: context))
}
