import Foundation

/// Why a message could not be read.
package enum AgentProtocolError: Error, Equatable {
    case truncated
    case trailingBytes
    case empty
}

/// The OpenSSH agent protocol's message numbers (draft-miller-ssh-agent §5.1).
package enum AgentMessageType {
    package static let failure: UInt8 = 5
    package static let success: UInt8 = 6
    package static let requestIdentities: UInt8 = 11
    package static let identitiesAnswer: UInt8 = 12
    package static let signRequest: UInt8 = 13
    package static let signResponse: UInt8 = 14
    package static let addIdentity: UInt8 = 17
    package static let removeIdentity: UInt8 = 18
    package static let removeAllIdentities: UInt8 = 19
    package static let addSmartcardKey: UInt8 = 20
    package static let removeSmartcardKey: UInt8 = 21
    package static let lock: UInt8 = 22
    package static let unlock: UInt8 = 23
    package static let addIdentityConstrained: UInt8 = 25
    package static let addSmartcardKeyConstrained: UInt8 = 26
    package static let `extension`: UInt8 = 27
    package static let extensionFailure: UInt8 = 28
}

/// A request from an agent client, parsed.
package enum AgentRequest: Equatable {
    case requestIdentities
    /// Sign `data` with the key whose public blob is `keyBlob`; `flags` as the protocol defines (SHA-2 flags are for
    /// RSA only).
    case sign(keyBlob: [UInt8], data: [UInt8], flags: UInt32)
    /// Add, remove or smartcard requests: refused, the agent holds only its own keys.
    case keyManagement
    case lock(passphrase: [UInt8])
    case unlock(passphrase: [UInt8])
    /// `session-bind@openssh.com` (OpenSSH 8.9+): the host key of the connection the following signatures are for.
    case sessionBind(hostKey: [UInt8], sessionIdentifier: [UInt8], isForwarding: Bool)
    case otherExtension(name: String)
    case unknown(type: UInt8)

    /// Parses one message body (the type byte and its contents, without the length).
    ///
    /// - Throws: ``AgentProtocolError`` for an empty, truncated or overlong message of a known type.
    package static func parse(_ body: [UInt8]) throws -> AgentRequest {
        var reader = SSHReader(body)
        guard !body.isEmpty else { throw AgentProtocolError.empty }
        let type = try reader.byte()
        let request: AgentRequest
        switch type {
        case AgentMessageType.requestIdentities:
            request = .requestIdentities
        case AgentMessageType.signRequest:
            request = .sign(keyBlob: try reader.string(), data: try reader.string(), flags: try reader.uint32())
        case AgentMessageType.addIdentity, AgentMessageType.removeIdentity, AgentMessageType.removeAllIdentities,
            AgentMessageType.addSmartcardKey, AgentMessageType.removeSmartcardKey,
            AgentMessageType.addIdentityConstrained, AgentMessageType.addSmartcardKeyConstrained:
            _ = reader.rest()
            request = .keyManagement
        case AgentMessageType.lock:
            request = .lock(passphrase: try reader.string())
        case AgentMessageType.unlock:
            request = .unlock(passphrase: try reader.string())
        case AgentMessageType.extension:
            let name = String(decoding: try reader.string(), as: UTF8.self)
            if name == "session-bind@openssh.com" {
                let hostKey = try reader.string()
                let session = try reader.string()
                _ = try reader.string()  // the host's signature over the session identifier
                request = .sessionBind(
                    hostKey: hostKey, sessionIdentifier: session, isForwarding: try reader.byte() != 0)
            } else {
                _ = reader.rest()
                request = .otherExtension(name: name)
            }
        default:
            _ = reader.rest()
            request = .unknown(type: type)
        }
        guard reader.isAtEnd else { throw AgentProtocolError.trailingBytes }
        return request
    }
}

/// Responses, encoded as message bodies (without the length).
package enum AgentResponse {
    package static let failure: [UInt8] = [AgentMessageType.failure]
    package static let success: [UInt8] = [AgentMessageType.success]

    package static func identities(_ keys: [(blob: [UInt8], comment: String)]) -> [UInt8] {
        var writer = SSHWriter()
        writer.byte(AgentMessageType.identitiesAnswer)
        writer.uint32(UInt32(keys.count))
        for key in keys {
            writer.string(key.blob)
            writer.string(key.comment)
        }
        return writer.bytes
    }

    package static func signature(_ signature: [UInt8]) -> [UInt8] {
        var writer = SSHWriter()
        writer.byte(AgentMessageType.signResponse)
        writer.string(signature)
        return writer.bytes
    }
}
