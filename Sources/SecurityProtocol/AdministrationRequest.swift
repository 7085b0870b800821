import Foundation

/// Administrative requests: the user's enrolled fingerprints, the reader, and the passcode's removal, each under
/// the authentication Apple's devices ask for (changing fingerprints or removing the passcode needs the passcode
/// first). What `lactl`, the examples and the tests do instead of reaching into the engine.
package enum AdministrationRequest: Sendable, Equatable {
    /// Enrolls `finger` (replacing an earlier print of it); the context must hold a passcode credential (not a
    /// reused one) from the last five minutes. Progress arrives as ``AdministrationEvent/enrollment(_:)``; the
    /// answer is ``AdministrationEvent/enrolled(_:)``.
    case enroll(Finger, context: AuthenticationContextID)
    /// Removes an enrolled print, under the same rule as ``enroll(_:context:)``.
    case removePrint(PrintIdentifier, context: AuthenticationContextID)
    /// The enrolled prints (without templates) and the enrolled-set state hash.
    case enrolledPrints
    /// Opens the reader and describes it.
    case reader
    /// Waits for a finger and says which print it matched (counted as an attempt, as any scan is). Progress
    /// arrives as ``AdministrationEvent/verification(_:)``.
    case verifyFinger
    /// Records that the user's passcode was removed: every `WhenPasscodeSetThisDeviceOnly` item is destroyed, as
    /// Apple does. The context must hold a recent passcode credential (the last use of the passcode).
    case passcodeRemoved(context: AuthenticationContextID)
    /// Releases the reader (another program may use it).
    case closeReader
    /// Who the engine takes the caller for (`lactl whoami`); the answer is ``AdministrationEvent/caller(_:)``.
    case callerIdentity
    /// Grants an administrative tool's connection what its hello claimed beyond the tool's own groups (other
    /// groups, or every group), after the user authenticated: the context, created on this connection, must hold a
    /// finger or passcode credential the daemon evaluated (not a reused one) in the last few seconds, and is spent.
    /// The answer is ``AdministrationEvent/caller(_:)`` with the groups held from then on. Only localauthd widens
    /// (embedded, the configuration names the groups).
    case widenAccessGroups(context: AuthenticationContextID)
}

/// What an administrative request reports: progress while it runs, then one answer.
package enum AdministrationEvent: Sendable, Equatable {
    case enrollment(EnrollmentEvent)
    case verification(VerificationEvent)
    case enrolled(EnrolledPrintInfo)
    case prints([EnrolledPrintInfo], stateHash: Data?)
    case reader(ReaderInfo)
    case matched(EnrolledPrintInfo)
    case success
    case caller(CallerInfo)
}

extension AdministrationRequest {
    /// The context the request names, whose owner must be the calling connection.
    package var contextID: AuthenticationContextID? {
        switch self {
        case .enroll(_, let id), .removePrint(_, let id), .passcodeRemoved(let id), .widenAccessGroups(let id): id
        case .enrolledPrints, .reader, .verifyFinger, .closeReader, .callerIdentity: nil
        }
    }
}

extension AdministrationRequest: ProtocolCodable {
    /// A variant: 1 enroll (fields 1 finger, 2 context), 2 removePrint (1 identifier, 2 context), 3 enrolledPrints,
    /// 4 reader, 5 verifyFinger, 6 passcodeRemoved (1 context), 7 closeReader, 8 callerIdentity, 9 widenAccessGroups
    /// (1 context).
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .enroll(let finger, let context):
            writer.variant(1) {
                $0.field(1, finger)
                $0.field(2, context)
            }
        case .removePrint(let identifier, let context):
            writer.variant(2) {
                $0.field(1, identifier)
                $0.field(2, context)
            }
        case .enrolledPrints: writer.variant(3)
        case .reader: writer.variant(4)
        case .verifyFinger: writer.variant(5)
        case .passcodeRemoved(let context): writer.variant(6) { $0.field(1, context) }
        case .closeReader: writer.variant(7)
        case .callerIdentity: writer.variant(8)
        case .widenAccessGroups(let context): writer.variant(9) { $0.field(1, context) }
        }
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .enroll(try payload.field(1), context: try payload.field(2))
            case 2: .removePrint(try payload.field(1), context: try payload.field(2))
            case 3: .enrolledPrints
            case 4: .reader
            case 5: .verifyFinger
            case 6: .passcodeRemoved(context: try payload.field(1))
            case 7: .closeReader
            case 8: .callerIdentity
            case 9: .widenAccessGroups(context: try payload.field(1))
            default: nil
            }
        }
    }
}

extension AdministrationEvent: ProtocolCodable {
    /// A variant: 1 enrollment, 2 verification, 3 enrolled, 4 prints (fields 1 prints, 2 stateHash when there is
    /// one), 5 reader, 6 matched, 7 success, 8 caller.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .enrollment(let event): writer.variant(1) { $0.field(1, event) }
        case .verification(let event): writer.variant(2) { $0.field(1, event) }
        case .enrolled(let print): writer.variant(3) { $0.field(1, print) }
        case .prints(let prints, let stateHash):
            writer.variant(4) {
                $0.field(1, prints)
                $0.optionalField(2, stateHash)
            }
        case .reader(let info): writer.variant(5) { $0.field(1, info) }
        case .matched(let print): writer.variant(6) { $0.field(1, print) }
        case .success: writer.variant(7)
        case .caller(let info): writer.variant(8) { $0.field(1, info) }
        }
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .enrollment(try payload.field(1))
            case 2: .verification(try payload.field(1))
            case 3: .enrolled(try payload.field(1))
            case 4: .prints(try payload.field(1), stateHash: try payload.optionalField(2))
            case 5: .reader(try payload.field(1))
            case 6: .matched(try payload.field(1))
            case 7: .success
            case 8: .caller(try payload.field(1))
            default: nil
            }
        }
    }
}
