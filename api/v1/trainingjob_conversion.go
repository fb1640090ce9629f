package v1

// Hub marks v1 as the conversion hub for TrainingJob: every other version
// converts to and from it.
func (*TrainingJob) Hub() {}
