import SecureCrypto

/// What the engine tells the client while a request needs the user: a fingerprint prompt beginning, its progress
/// and end, a question to answer, a message to show. The client's presenter draws it; questions and the
/// fingerprint prompt's buttons are answered with a ``PromptAnswer`` naming the same request.
///
/// The engine never calls into client objects: this event and the answer are all that cross.
package struct PromptEvent: Sendable, Equatable {
    /// The request the prompt belongs to: the number the client gave it, unique among the connection's requests in
    /// flight.
    package var request: UInt64
    /// What happened.
    package var kind: Kind

    package enum Kind: Sendable, Equatable {
        /// A fingerprint is wanted; the client may answer `.action(.cancel)` or `.action(.fallback)` while it lasts.
        case fingerprintBegan(EvaluationPrompt)
        /// Progress of the fingerprint prompt.
        case fingerprint(FingerprintPromptEvent)
        /// The fingerprint prompt is over (matched, failed, cancelled or fell back).
        case fingerprintEnded
        /// A question (the passcode, PAM's other questions, or an application password) that the engine waits for:
        /// the client answers `.answer(question:…)` with the same number, or nil to cancel.
        case question(UInt64, EvaluationPrompt, PasscodePrompt, isApplicationPassword: Bool)
        /// A message from the passcode back end ("Authentication failed").
        case message(PasscodeMessage)
        /// A program not on an item's trusted-application list asks to use it: the client answers
        /// `.choice(question:…)` with the same number (nil cancels, as Deny does).
        case confirmation(UInt64, TrustPrompt)
    }

    /// An event of request `request`.
    package init(request: UInt64, _ kind: Kind) {
        self.request = request
        self.kind = kind
    }
}

/// The client's answer to a ``PromptEvent``: a button of the fingerprint prompt, or the answer to a question.
/// An answer to no prompt in progress (late, or for another request) is ignored.
package struct PromptAnswer: Sendable, Equatable {
    /// The request whose prompt this answers.
    package var request: UInt64
    /// The answer.
    package var kind: Kind

    package enum Kind: Sendable, Equatable {
        /// A button of the fingerprint prompt: cancel or the fallback.
        case action(PromptAction)
        /// The answer to question `question`, in zeroizing memory; nil cancels.
        case answer(question: UInt64, SecureBytes?)
        /// The answer to confirmation `question`; nil cancels.
        case choice(question: UInt64, TrustChoice?)
    }

    /// An answer for request `request`.
    package init(request: UInt64, _ kind: Kind) {
        self.request = request
        self.kind = kind
    }
}

extension PromptEvent: ProtocolCodable {
    /// A record: 1 request, 2 kind, a variant: 1 fingerprintBegan (field 1 prompt), 2 fingerprint (field 1 event),
    /// 3 fingerprintEnded, 4 question (fields 1 number, 2 prompt, 3 question, 4 isApplicationPassword), 5 message
    /// (field 1), 6 confirmation (fields 1 number, 2 prompt).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, request)
        writer.field(2, kind)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(request: try reader.field(1), try reader.field(2))
    }
}

extension PromptEvent.Kind: ProtocolCodable {
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .fingerprintBegan(let prompt): writer.variant(1) { $0.field(1, prompt) }
        case .fingerprint(let event): writer.variant(2) { $0.field(1, event) }
        case .fingerprintEnded: writer.variant(3)
        case .question(let number, let prompt, let question, let isApplicationPassword):
            writer.variant(4) {
                $0.field(1, number)
                $0.field(2, prompt)
                $0.field(3, question)
                $0.field(4, isApplicationPassword)
            }
        case .message(let message): writer.variant(5) { $0.field(1, message) }
        case .confirmation(let number, let prompt):
            writer.variant(6) {
                $0.field(1, number)
                $0.field(2, prompt)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .fingerprintBegan(try payload.field(1))
            case 2: .fingerprint(try payload.field(1))
            case 3: .fingerprintEnded
            case 4:
                .question(
                    try payload.field(1), try payload.field(2), try payload.field(3),
                    isApplicationPassword: try payload.field(4))
            case 5: .message(try payload.field(1))
            case 6: .confirmation(try payload.field(1), try payload.field(2))
            default: nil
            }
        }
    }
}

extension PromptAnswer: ProtocolCodable {
    /// A record: 1 request, 2 kind, a variant: 1 action (field 1), 2 answer (field 1 question number, field 2 the
    /// secret, left out when nil), 3 choice (field 1 question number, field 2 the choice, left out when nil).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, request)
        writer.field(2, kind)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(request: try reader.field(1), try reader.field(2))
    }
}

extension PromptAnswer.Kind: ProtocolCodable {
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .action(let action): writer.variant(1) { $0.field(1, action) }
        case .answer(let question, let secret):
            writer.variant(2) {
                $0.field(1, question)
                $0.optionalField(2, secret)
            }
        case .choice(let question, let choice):
            writer.variant(3) {
                $0.field(1, question)
                $0.optionalField(2, choice)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .action(try payload.field(1))
            case 2: .answer(question: try payload.field(1), try payload.optionalField(2))
            case 3: .choice(question: try payload.field(1), try payload.optionalField(2))
            default: nil
            }
        }
    }
}
