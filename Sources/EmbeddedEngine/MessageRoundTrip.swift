import SecurityProtocol

/// The codec round trip an embedded client puts every message through when asked to
/// (`EmbeddedConfiguration.roundTripsMessages`): encode, decode, and require the decoded value to encode to the
/// same bytes, so that in-process tests exercise the format localauthd speaks.
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
