package server

// AnswerOverhead is answerOverhead, for the tests of the bound on answers.
const AnswerOverhead = answerOverhead
