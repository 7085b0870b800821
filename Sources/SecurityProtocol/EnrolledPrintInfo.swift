import Foundation

/// What is known about an enrolled print without its template.
package struct EnrolledPrintInfo: Sendable, Equatable {
    /// The print's random identifier (covered by the state hash).
    package var identifier: PrintIdentifier
    /// Which finger was scanned.
    package var finger: Finger
    /// The user the print belongs to.
    package var username: String
    /// The libfprint driver that made it (`fp_print_get_driver`); a print only matches on that driver's readers.
    package var driver: String
    /// The reader's device id within its driver (`fp_print_get_device_id`).
    package var deviceID: String
    /// When it was enrolled (whole seconds).
    package var enrolledAt: Date

    /// Describes an enrolled print.
    package init(
        identifier: PrintIdentifier, finger: Finger, username: String, driver: String, deviceID: String,
        enrolledAt: Date
    ) {
        self.identifier = identifier
        self.finger = finger
        self.username = username
        self.driver = driver
        self.deviceID = deviceID
        self.enrolledAt = enrolledAt
    }
}

extension EnrolledPrintInfo: ProtocolCodable {
    /// A record: 1 identifier, 2 finger, 3 username, 4 driver, 5 deviceID, 6 enrolledAt.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, identifier)
        writer.field(2, finger)
        writer.field(3, username)
        writer.field(4, driver)
        writer.field(5, deviceID)
        writer.field(6, enrolledAt)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            identifier: try reader.field(1), finger: try reader.field(2), username: try reader.field(3),
            driver: try reader.field(4), deviceID: try reader.field(5), enrolledAt: try reader.field(6))
    }
}
