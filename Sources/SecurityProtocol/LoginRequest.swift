import SecureCrypto

/// What the PAM module `pam_localauth.so` tells localauthd about a user's login sessions, from a process it forked
/// and switched to that user (so the kernel names the user, as for every other request). The login session is the
/// connecting process's parent: the program that runs the PAM stack (`login`, `sshd`, a display manager).
package enum LoginRequest: Sendable, Equatable {
    /// A login session opened. With the password the user typed at `auth` (which localauthd checks through its own
    /// PAM service before using it), the keychain is unlocked: its passcode classes are sealed under it from the
    /// first time on.
    case sessionOpened(password: SecureBytes?)
    /// A login session closed; when it was the user's last one, the keychain's `ak` classes lock.
    case sessionClosed
    /// The login password changed (PAM's `chauthtok`): the passcode classes, sealed under `old`, are sealed under
    /// `new` (which localauthd checks through PAM first).
    case passwordChanged(old: SecureBytes, new: SecureBytes)
    /// Whether a finger can be offered at the user's password prompt now (`auth … pam_localauth.so finger`): a reader,
    /// prints enrolled, no lockout. Answered at once, without the reader's being claimed.
    case fingerOffered
    /// Waits for one evaluation of a finger on the reader against the user's prints (the scans an evaluation takes;
    /// each failure counts toward the lockout); the connection's closing cancels it and frees the reader.
    case verifyFinger
}

/// What a finger step of the PAM module answered (``LoginOutcome/finger``).
package enum FingerAnswer: Int, Sendable, Equatable, CaseIterable {
    /// ``LoginRequest/fingerOffered``: a finger can be offered now.
    case offered = 1
    /// ``LoginRequest/verifyFinger``: an enrolled finger of the user matched.
    case matched = 2
    /// ``LoginRequest/verifyFinger``: the evaluation ended without a match (its failures counted), or no finger
    /// came within the reader's attempt time (nothing counted): the module asks again.
    case notMatched = 3
    /// Either: no finger can be offered (the outcome's note says why: no reader, none enrolled, locked out).
    case notOffered = 4
}

extension FingerAnswer: ProtocolCodable {}

/// localauthd's answer to a ``LoginRequest``.
package struct LoginOutcome: Sendable, Equatable {
    /// Whether the keychain is unlocked after the step.
    package var unlocked: Bool
    /// The login sessions localauthd counts for the user now (those whose program still runs).
    package var sessions: Int
    /// Why the keychain did not open, or what else the administrator should know; never a secret.
    package var note: String?
    /// The answer of a finger step; nil for the session and password steps.
    package var finger: FingerAnswer?

    package init(unlocked: Bool, sessions: Int, note: String? = nil, finger: FingerAnswer? = nil) {
        self.unlocked = unlocked
        self.sessions = sessions
        self.note = note
        self.finger = finger
    }
}

extension LoginRequest: ProtocolCodable {
    /// A variant: 1 sessionOpened (optional field 1 password), 2 sessionClosed, 3 passwordChanged (1 old, 2 new),
    /// 4 fingerOffered, 5 verifyFinger.
    /// `PAM/pam_localauth.c` writes these bytes by hand: a change here is a change there.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .sessionOpened(let password): writer.variant(1) { $0.optionalField(1, password) }
        case .sessionClosed: writer.variant(2)
        case .passwordChanged(let old, let new):
            writer.variant(3) {
                $0.field(1, old)
                $0.field(2, new)
            }
        case .fingerOffered: writer.variant(4)
        case .verifyFinger: writer.variant(5)
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .sessionOpened(password: try payload.optionalField(1))
            case 2: .sessionClosed
            case 3: .passwordChanged(old: try payload.field(1), new: try payload.field(2))
            case 4: .fingerOffered
            case 5: .verifyFinger
            default: nil
            }
        }
    }
}

extension LoginOutcome: ProtocolCodable {
    /// A record: 1 unlocked, 2 sessions, optional 3 note, optional 4 finger (``FingerAnswer``'s raw value).
    /// `PAM/pam_localauth.c` reads these bytes by hand.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, unlocked)
        writer.field(2, sessions)
        writer.optionalField(3, note)
        writer.optionalField(4, finger)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            unlocked: try reader.field(1), sessions: try reader.field(2), note: try reader.optionalField(3),
            finger: try reader.optionalField(4))
    }
}
