/// What is known about the opened reader.
package struct ReaderInfo: Sendable, Equatable {
    /// The libfprint driver id, e.g. `virtual_device` or `goodixmoc`.
    package var driver: String
    /// The device id within the driver.
    package var deviceID: String
    /// A human-readable name.
    package var name: String
    /// How many scans an enrollment needs.
    package var enrollStages: Int
    /// Whether the reader can identify (match a scan against several prints at once).
    package var canIdentify: Bool
    /// Whether the reader keeps prints in its own storage (then removing a print also deletes it there).
    package var hasStorage: Bool

    /// A description with these values.
    package init(
        driver: String, deviceID: String, name: String, enrollStages: Int, canIdentify: Bool, hasStorage: Bool
    ) {
        self.driver = driver
        self.deviceID = deviceID
        self.name = name
        self.enrollStages = enrollStages
        self.canIdentify = canIdentify
        self.hasStorage = hasStorage
    }
}

extension ReaderInfo: ProtocolCodable {
    /// A record: 1 driver, 2 deviceID, 3 name, 4 enrollStages, 5 canIdentify, 6 hasStorage.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, driver)
        writer.field(2, deviceID)
        writer.field(3, name)
        writer.field(4, enrollStages)
        writer.field(5, canIdentify)
        writer.field(6, hasStorage)
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self.init(
            driver: try reader.field(1), deviceID: try reader.field(2), name: try reader.field(3),
            enrollStages: try reader.field(4), canIdentify: try reader.field(5), hasStorage: try reader.field(6))
    }
}
