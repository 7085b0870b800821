/// What the daemon tells a prompt agent it registered: whom it serves and which pinentry it must run.
///
/// The pinentry is the administrator's choice (`localauthd.conf`), not the agent's: the agent is `lactl` as the
/// administrator registered it, but its arguments and environment are the user's, and any program of the user can
/// start it. So the daemon decides, and the agent runs `pinentry` unless `mayChoosePinentry` says the user's own
/// choice (`--pinentry`, `$PINENTRY_PROGRAM`) is allowed; the agent runs only a program root owns either way.
package struct AgentRegistration: Sendable, Equatable {
    /// The user the agent serves, as the daemon names it in logs (`uid 1000`).
    package var serves: String
    /// The pinentry program the administrator named (`agent-pinentry`, default `/usr/bin/pinentry`).
    package var pinentry: String
    /// Whether the agent may run a pinentry the user names instead (`agent-pinentry-choice = yes`).
    package var mayChoosePinentry: Bool
    /// The agent this one replaces, when one served the user before in this daemon's life (its pid; it has
    /// exited), so that the new agent can say so.
    package var replaced: Int32?

    /// A registration with these values.
    package init(serves: String, pinentry: String, mayChoosePinentry: Bool, replaced: Int32? = nil) {
        self.serves = serves
        self.pinentry = pinentry
        self.mayChoosePinentry = mayChoosePinentry
        self.replaced = replaced
    }
}

extension AgentRegistration: ProtocolCodable {
    /// A record: 1 serves, 2 pinentry, 3 mayChoosePinentry, 4 replaced (optional).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, serves)
        writer.field(2, pinentry)
        writer.field(3, mayChoosePinentry)
        writer.optionalField(4, replaced)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            serves: try reader.field(1), pinentry: try reader.field(2), mayChoosePinentry: try reader.field(3),
            replaced: try reader.optionalField(4))
    }
}
