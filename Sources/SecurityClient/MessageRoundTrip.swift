import SecurityProtocol
import SecurityServer

/// The codec round trip an embedded client puts every message through when asked to
/// (`EmbeddedConfiguration.roundTripsMessages`): encode, decode, and require the decoded value to encode to the
/// same bytes, so that in-process tests exercise the format the daemon will speak.
///
/// A message that does not survive is a codec bug, and stops the process with the message's type and the codec's
/// error (never its contents).
enum MessageRoundTrip {
    /// `value` after a trip through its encoding.
    static func value<Value: ProtocolCodable>(_ value: Value) -> Value {
        let frame = value.encoded()
        let decoded: Value
        do {
            decoded = try Value(decoding: frame)
        } catch {
            preconditionFailure("protocol round trip: \(Value.self) does not decode: \(error)")
        }
        precondition(decoded.encoded() == frame, "protocol round trip: \(Value.self) re-encodes differently")
        return decoded
    }

    /// What `body` returns, or the status it throws, after a trip through its encoding.
    static func result<Value: ProtocolCodable>(_ body: () throws -> Value) throws -> Value {
        do {
            return value(try body())
        } catch let status as KeychainStatus {
            throw value(status)
        } catch let failure as AuthenticationError {
            throw value(failure)
        }
    }

    /// What `body` returns, or the error it throws, after a trip through its encoding.
    static func result<Value: ProtocolCodable>(_ body: () async throws -> Value) async throws -> Value {
        do {
            return value(try await body())
        } catch let status as KeychainStatus {
            throw value(status)
        } catch let failure as AuthenticationError {
            throw value(failure)
        }
    }

    /// `upstream`'s elements, each after a trip through its encoding; ending `upstream` when this stream ends.
    static func stream<Element: ProtocolCodable>(_ upstream: AsyncStream<Element>) -> AsyncStream<Element> {
        AsyncStream { continuation in
            let relay = Task {
                for await element in upstream {
                    continuation.yield(value(element))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in relay.cancel() }
        }
    }
}

extension AuthenticationRequest {
    /// The request with every part that has an encoding after a trip through it; presenter objects have none yet
    /// and pass as they are.
    func roundTrippingPayloads() -> AuthenticationRequest {
        typealias Trip = MessageRoundTrip
        switch self {
        case .createContext, .biometryState, .environment:
            return self
        case .invalidate(let id):
            return .invalidate(Trip.value(id))
        case .discard(let id):
            return .discard(Trip.value(id))
        case .configure(let id, let presenter, let reason, let interactionNotAllowed):
            return .configure(
                Trip.value(id), presenter: presenter, reason: reason.map(Trip.value),
                interactionNotAllowed: Trip.value(interactionNotAllowed))
        case .evaluatePolicy(let policy, let id, let options):
            return .evaluatePolicy(Trip.value(policy), Trip.value(id), options.roundTrippingPayloads())
        case .canEvaluatePolicy(let policy, let id):
            return .canEvaluatePolicy(Trip.value(policy), Trip.value(id))
        case .evaluateAccessControl(let policy, let operation, let id, let options):
            return .evaluateAccessControl(
                Trip.value(policy), Trip.value(operation), Trip.value(id), options.roundTrippingPayloads())
        case .setApplicationPassword(let password, let id):
            return .setApplicationPassword(password.map(Trip.value), Trip.value(id))
        case .isApplicationPasswordSet(let id):
            return .isApplicationPasswordSet(Trip.value(id))
        case .evaluatedDomainState(let id):
            return .evaluatedDomainState(Trip.value(id))
        case .unlockWithPasscode(let options):
            return .unlockWithPasscode(options.roundTrippingPayloads())
        }
    }
}

extension EvaluationOptions {
    /// The options with the prompt, the interaction rule and the reuse window after a trip through their encoding.
    func roundTrippingPayloads() -> EvaluationOptions {
        var options = self
        options.prompt = MessageRoundTrip.value(prompt)
        options.interactionNotAllowed = MessageRoundTrip.value(interactionNotAllowed)
        options.reuseDuration = MessageRoundTrip.value(reuseDuration)
        return options
    }
}
