import EmbeddedEngine
import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import TestSupport
import Testing

/// A presenter whose passcode answer waits until the test opens `gate` (then cancels): a client that does not
/// answer. `asked` is signalled each time it is asked.
final class StalledPresenter: AuthenticationPresenter, Sendable {
    let gate = DispatchSemaphore(value: 0)
    let asked = DispatchSemaphore(value: 0)

    func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {}

    func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? {
        asked.signal()
        gate.wait()
        return nil
    }
}

/// Issue "One message protocol", items 2 and 5: the engine's prompts are messages tagged with their request, which
/// any client answers with messages; several requests are in flight at once; async requests never hold Swift's
/// cooperative threads while they wait.
@Suite("Prompts as messages", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct PromptMessageTests {
    /// The test plays the client from bytes: it decodes each prompt event frame and answers with answer frames.
    @Test(.embeddedOnly("plays the client against the engine's prompt channel; DaemonTests does it over the socket"))
    func aClientAnswersTheEnginesPromptEventsWithAnswerFrames() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let engine = try #require(world.engine.embeddedEngine)
        let caller = try #require(world.client as? EmbeddedClient).caller
        guard case .context(let id) = try await engine.handle(.createContext, caller: caller) else {
            Issue.record("no context")
            return
        }
        let (frames, sink) = AsyncStream<SecureBytes>.makeStream()
        let channel = PromptChannel(request: 41) { sink.yield($0.encoded()) }
        let client = Task.detached { () throws -> [PromptEvent] in
            var seen: [PromptEvent] = []
            for await frame in frames {
                let event = try PromptEvent(decoding: frame)
                seen.append(event)
                guard case .question(let number, _, _, _) = event.kind else { continue }
                // An answer naming another request is ignored; the right one is taken.
                let stray = PromptAnswer(request: 99, .answer(question: number, SecureBytes(Array("wrong".utf8))))
                channel.receive(try PromptAnswer(decoding: stray.encoded()))
                let answer = PromptAnswer(
                    request: event.request, .answer(question: number, SecureBytes(Array("secret".utf8))))
                channel.receive(try PromptAnswer(decoding: answer.encoded()))
            }
            return seen
        }
        let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "Open the vault"))
        let response = try await engine.handle(
            .evaluatePolicy(.passcode, id, options), caller: caller, prompts: channel)
        sink.finish()
        let seen = try await client.value
        guard case .credential(let credential) = response else {
            Issue.record("answered \(response)")
            return
        }
        #expect(credential.method == AuthenticationMethod.passcode)
        #expect(!seen.isEmpty && seen.allSatisfy { $0.request == 41 })
        let questions = seen.compactMap { event -> (EvaluationPrompt, PasscodePrompt)? in
            guard case .question(_, let prompt, let question, isApplicationPassword: false) = event.kind else {
                return nil
            }
            return (prompt, question)
        }
        #expect(questions.count == 1)
        #expect(questions.first?.0.reason == "Open the vault")
        #expect(questions.first?.1.echo == false)
        await world.close()
    }

    @Test func invalidateReachesAPromptWhoseClientDoesNotAnswer() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let presenter = StalledPresenter()
        try await world.run {
            let context = LAContext()
            context.presenter = presenter
            async let outcome = laErrorCode {
                try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "r")
            }
            #expect(await signalled(presenter.asked))
            let invalidated = ContinuousClock.now
            context.invalidate()
            #expect(await outcome == .appCancel)
            // Bounded, not a speed target: the engine stops waiting for the answer, the presenter still holds it.
            #expect(ContinuousClock.now - invalidated < .seconds(30))
            presenter.gate.signal()
        }
        await world.close()
    }

    @Test(.embeddedOnly("closes the engine's prompt channel; DaemonTests kills a client process mid-prompt"))
    func theClientGoingAwayMidPromptIsSystemCancelAndFreesTheReader() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let engine = try #require(world.engine.embeddedEngine)
        let caller = try #require(world.client as? EmbeddedClient).caller
        guard case .context(let id) = try await engine.handle(.createContext, caller: caller) else {
            Issue.record("no context")
            return
        }
        let began = DispatchSemaphore(value: 0)
        let channel = PromptChannel(request: 7) { event in
            if case .fingerprintBegan = event.kind { began.signal() }
        }
        let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "r"))
        async let outcome: AuthenticationError.Code? = {
            do {
                _ = try await engine.handle(.evaluatePolicy(.biometrics, id, options), caller: caller, prompts: channel)
                return nil
            } catch let error as AuthenticationError {
                return error.code
            }
        }()
        #expect(await signalled(began))
        channel.close()
        #expect(try await outcome == .systemCancel)
        // The reader is free at once: the next evaluation reads a finger.
        try await world.run {
            let context = makeContext(in: world)
            async let matched = context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "r")
            try await world.scan("alice-1")
            #expect(try await matched)
        }
        await world.close()
    }

    @Test func kSecUseOperationPromptIsTheReasonTheKeychainPromptShows() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        try await world.run {
            #expect(addProtected("token", flags: .devicePasscode) == errSecSuccess)
            let presenter = ScriptedAuthenticationPresenter(passcodes: ["secret", "secret"])
            let context = makeContext(in: world, presenter: presenter)
            context.localizedReason = "the context's reason"
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl-tests",
                kSecAttrAccount as String: "token", kSecReturnData as String: true,
                kSecUseAuthenticationContext as String: context,
                kSecUseOperationPrompt as String: "Show the API token",
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecSuccess)
            #expect(presenter.shownPrompts.last?.reason == "Show the API token")
            query[kSecUseOperationPrompt as String] = nil
            query[kSecUseAuthenticationContext as String] = makeContext(in: world, presenter: presenter)
            (query[kSecUseAuthenticationContext as String] as! LAContext).localizedReason = "the context's reason"
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecSuccess)
            #expect(presenter.shownPrompts.last?.reason == "the context's reason")
        }
        await world.close()
    }

    /// Async keychain requests wait on prompts nobody answers, more than the cooperative pool has threads;
    /// other async work and an ordinary request still complete, because the waiting happens on threads of their
    /// own.
    @Test func asyncRequestsWaitingOnPromptsDoNotHoldTheCooperativePool() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let presenter = StalledPresenter()
        let client = world.client
        try await world.run {
            #expect(addProtected("guarded", flags: .devicePasscode) == errSecSuccess)
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl-tests",
                        kSecAttrAccount as String: "plain", kSecValueData as String: Data("x".utf8),
                    ] as CFDictionary, nil)
                    == errSecSuccess)
        }
        let guarded: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("acl-tests"), "acct": .string("guarded"), "r_Data": .bool(true),
        ]
        let adapted = try #require(
            KeychainClientSelection.$current.withValue(client) {
                let context = LAContext()
                context.presenter = presenter
                return context.keychainPresenter
            })
        // Swift's cooperative pool has one thread per processor.
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        let waiting = (0..<count).map { _ in
            Task { try? await client.send(.copyMatching(guarded), options: .keychainDefault, presenter: adapted) }
        }
        #expect(await signalled(presenter.asked))
        #expect(await Task.detached { 6 * 7 }.value == 42)
        let plain: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("acl-tests"), "acct": .string("plain"), "r_Data": .bool(true),
        ]
        guard case .items(let found) = try await client.send(.copyMatching(plain)) else {
            Issue.record("no items")
            return
        }
        #expect(found.items.count == 1)
        for _ in 0..<count { presenter.gate.signal() }
        for request in waiting { _ = await request.value }
        await world.close()
    }
}
