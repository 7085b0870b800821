/// What a client sends on a connection to `localauthd`: a hello first, then requests (each with a number the
/// client chose, unique among its requests in flight), prompt answers and subscriptions, in any order. Several
/// requests may be in flight at once; answers come back tagged with their number.
package enum ClientMessage: Sendable, Equatable {
    /// The first message: the protocol versions the client speaks, and the keychain access groups the program
    /// asks for (`LA_ACCESS_GROUPS`). Embedded, the claim is the caller's groups; the daemon grants only what the
    /// program's registration gives (docs/APP-REGISTRY.md), narrowed to the claim.
    case hello(versions: [UInt64], accessGroups: [String], allGroups: Bool)
    /// A keychain request; `interactive` false when the client has nobody to draw prompts.
    case keychain(UInt64, KeychainRequest, EvaluationOptions, interactive: Bool)
    /// An enclave-key request.
    case key(UInt64, KeyRequest, EvaluationOptions, interactive: Bool)
    /// An authentication-context request.
    case authentication(UInt64, AuthenticationRequest, interactive: Bool)
    /// An administrative request; its progress comes as ``ServerMessage/progress(_:_:)``.
    case administration(UInt64, AdministrationRequest)
    /// An answer to a prompt event of a request in flight.
    case answer(PromptAnswer)
    /// Start streaming the keychain events the client may see, tagged with this number.
    case subscribeKeychainEvents(UInt64)
    /// Start streaming the authentication environment's changes, tagged with this number.
    case subscribeEnvironment(UInt64)
    /// Stop a subscription.
    case unsubscribe(UInt64)
    /// A login session's step, from the PAM module (docs/PROTOCOL.md, "Login sessions").
    case login(UInt64, LoginRequest)
    /// This connection becomes its user's prompt agent (`lactl agent`; one per user): the daemon sends it the
    /// prompts of that user's programs (``ServerMessage/agentPrompt(_:_:)``), and it answers them with
    /// ``answer(_:)``. Answered by ``ServerMessage/agentRegistered(_:_:)`` or a `keychainFailure`.
    case registerAgent(UInt64)
}

/// What `localauthd` sends on a connection: the welcome, then answers, progress, prompt events and subscribed
/// events, each tagged with the client's number.
package enum ServerMessage: Sendable, Equatable {
    /// The answer to the hello: the version both speak from now on.
    case welcome(version: UInt64)
    case keychain(UInt64, KeychainResponse)
    case key(UInt64, KeyResponse)
    case authentication(UInt64, AuthenticationResponse)
    /// The final answer of an administrative request.
    case administration(UInt64, AdministrationEvent)
    /// Progress of an administrative request in flight.
    case progress(UInt64, AdministrationEvent)
    /// A request failed with an `OSStatus` (keychain and key requests, and administration's store failures).
    case keychainFailure(UInt64, KeychainStatus)
    /// A request failed with an `LAError` code.
    case authenticationFailure(UInt64, AuthenticationError)
    /// A prompt of a request in flight (the event names the request).
    case prompt(PromptEvent)
    /// A keychain event of a subscription.
    case keychainEvent(UInt64, EngineEvent)
    /// An environment change of a subscription.
    case environment(UInt64, EnvironmentSnapshot)
    /// The daemon refuses the connection or a message it cannot read, then closes.
    case refused(String)
    /// The answer to a login session's step.
    case login(UInt64, LoginOutcome)
    /// The connection is its user's prompt agent, and runs the pinentry the registration names.
    case agentRegistered(UInt64, AgentRegistration)
    /// To a prompt agent: a prompt of a program of its session, the program as the daemon identified it. The
    /// event's request number is the daemon's (unique among the agent's prompts); the agent answers with it.
    case agentPrompt(PromptEvent, CallerInfo)
    /// To a prompt agent: the prompts of that number are over (the request ended, or its program went away).
    case agentPromptEnded(UInt64)
    /// To a prompt agent: something its user should know (another agent tried to take its place), for it to show.
    case agentNotice(String)
}

extension ClientMessage: ProtocolCodable {
    /// A variant: 1 hello, 2 keychain, 3 key, 4 authentication, 5 administration, 6 answer,
    /// 7 subscribeKeychainEvents, 8 subscribeEnvironment, 9 unsubscribe, 10 login, 11 registerAgent; associated values
    /// as fields 1, 2, … in order.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .hello(let versions, let groups, let allGroups):
            writer.variant(1) {
                $0.field(1, versions)
                $0.field(2, groups)
                $0.field(3, allGroups)
            }
        case .keychain(let id, let request, let options, let interactive):
            writer.variant(2) {
                $0.field(1, id)
                $0.field(2, request)
                $0.field(3, options)
                $0.field(4, interactive)
            }
        case .key(let id, let request, let options, let interactive):
            writer.variant(3) {
                $0.field(1, id)
                $0.field(2, request)
                $0.field(3, options)
                $0.field(4, interactive)
            }
        case .authentication(let id, let request, let interactive):
            writer.variant(4) {
                $0.field(1, id)
                $0.field(2, request)
                $0.field(3, interactive)
            }
        case .administration(let id, let request):
            writer.variant(5) {
                $0.field(1, id)
                $0.field(2, request)
            }
        case .answer(let answer): writer.variant(6) { $0.field(1, answer) }
        case .subscribeKeychainEvents(let id): writer.variant(7) { $0.field(1, id) }
        case .subscribeEnvironment(let id): writer.variant(8) { $0.field(1, id) }
        case .unsubscribe(let id): writer.variant(9) { $0.field(1, id) }
        case .login(let id, let request):
            writer.variant(10) {
                $0.field(1, id)
                $0.field(2, request)
            }
        case .registerAgent(let id): writer.variant(11) { $0.field(1, id) }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1:
                .hello(
                    versions: try payload.field(1), accessGroups: try payload.field(2), allGroups: try payload.field(3))
            case 2:
                .keychain(
                    try payload.field(1), try payload.field(2), try payload.field(3), interactive: try payload.field(4))
            case 3:
                .key(
                    try payload.field(1), try payload.field(2), try payload.field(3), interactive: try payload.field(4))
            case 4: .authentication(try payload.field(1), try payload.field(2), interactive: try payload.field(3))
            case 5: .administration(try payload.field(1), try payload.field(2))
            case 6: .answer(try payload.field(1))
            case 7: .subscribeKeychainEvents(try payload.field(1))
            case 8: .subscribeEnvironment(try payload.field(1))
            case 9: .unsubscribe(try payload.field(1))
            case 10: .login(try payload.field(1), try payload.field(2))
            case 11: .registerAgent(try payload.field(1))
            default: nil
            }
        }
    }
}

extension ServerMessage: ProtocolCodable {
    /// A variant: 1 welcome, 2 keychain, 3 key, 4 authentication, 5 administration, 6 progress, 7 keychainFailure,
    /// 8 authenticationFailure, 9 prompt, 10 keychainEvent, 11 environment, 12 refused, 13 login, 14 agentRegistered,
    /// 15 agentPrompt, 16 agentPromptEnded, 17 agentNotice; associated values as fields 1, 2 in order.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .welcome(let version): writer.variant(1) { $0.field(1, version) }
        case .keychain(let id, let response): Self.pair(&writer, 2, id, response)
        case .key(let id, let response): Self.pair(&writer, 3, id, response)
        case .authentication(let id, let response): Self.pair(&writer, 4, id, response)
        case .administration(let id, let event): Self.pair(&writer, 5, id, event)
        case .progress(let id, let event): Self.pair(&writer, 6, id, event)
        case .keychainFailure(let id, let status): Self.pair(&writer, 7, id, status)
        case .authenticationFailure(let id, let error): Self.pair(&writer, 8, id, error)
        case .prompt(let event): writer.variant(9) { $0.field(1, event) }
        case .keychainEvent(let id, let event): Self.pair(&writer, 10, id, event)
        case .environment(let id, let snapshot): Self.pair(&writer, 11, id, snapshot)
        case .refused(let reason): writer.variant(12) { $0.field(1, reason) }
        case .login(let id, let outcome): Self.pair(&writer, 13, id, outcome)
        case .agentRegistered(let id, let registration): Self.pair(&writer, 14, id, registration)
        case .agentPrompt(let event, let caller):
            writer.variant(15) {
                $0.field(1, event)
                $0.field(2, caller)
            }
        case .agentPromptEnded(let number): writer.variant(16) { $0.field(1, number) }
        case .agentNotice(let text): writer.variant(17) { $0.field(1, text) }
        }
    }

    private static func pair<Value: ProtocolCodable>(
        _ writer: inout MessageWriter, _ tag: UInt8, _ id: UInt64, _ value: Value
    ) {
        writer.variant(tag) {
            $0.field(1, id)
            $0.field(2, value)
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .welcome(version: try payload.field(1))
            case 2: .keychain(try payload.field(1), try payload.field(2))
            case 3: .key(try payload.field(1), try payload.field(2))
            case 4: .authentication(try payload.field(1), try payload.field(2))
            case 5: .administration(try payload.field(1), try payload.field(2))
            case 6: .progress(try payload.field(1), try payload.field(2))
            case 7: .keychainFailure(try payload.field(1), try payload.field(2))
            case 8: .authenticationFailure(try payload.field(1), try payload.field(2))
            case 9: .prompt(try payload.field(1))
            case 10: .keychainEvent(try payload.field(1), try payload.field(2))
            case 11: .environment(try payload.field(1), try payload.field(2))
            case 12: .refused(try payload.field(1))
            case 13: .login(try payload.field(1), try payload.field(2))
            case 14: .agentRegistered(try payload.field(1), try payload.field(2))
            case 15: .agentPrompt(try payload.field(1), try payload.field(2))
            case 16: .agentPromptEnded(try payload.field(1))
            case 17: .agentNotice(try payload.field(1))
            default: nil
            }
        }
    }
}
